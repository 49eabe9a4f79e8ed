package extensions

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/atomicfile"
)

// Bounds of a review.
const (
	reviewExcerptRunes = 1200 // of each file's text
	reviewNameRunes    = 120  // of a name or path
	reviewMaxFiles     = 40   // shown in full; the rest are counted
)

// Review describes the workspace files that go into the system prompt or
// become commands: those waiting for an owner's approval first (each with
// its path, size, content hash, description and the start of its text),
// then those approved and in use. hash is what approves exactly the
// waiting set (Approve); "" when nothing waits.
func (s *Set) Review() (md, hash string) {
	v := s.view()
	var b strings.Builder
	b.WriteString("**Workspace files for the system prompt and commands**\n")
	if !s.opts.WorkspacePi {
		b.WriteString("\n(`.pi/skills` and `.pi/prompts` of the workspace are not read: `agent.workspace_pi` is off.)\n")
	}
	if len(v.files) == 0 {
		b.WriteString("\nThe workspace has none.")
		return b.String(), ""
	}
	pending := v.pending()
	sortFiles(pending)
	if len(pending) > 0 {
		b.WriteString("\n⏳ **Not used until an owner approves them:**\n")
		for i, f := range pending {
			if i == reviewMaxFiles {
				fmt.Fprintf(&b, "\n… and %d more (a workspace this full is better reviewed on disk).\n", len(pending)-i)
				break
			}
			writeFile(&b, f, v.changed(f))
		}
	}
	var inUse []string
	for _, f := range v.files {
		if v.ok[f.key()] {
			inUse = append(inUse, f.Kind+" "+inlineCode(f.Name))
		}
	}
	if len(inUse) > 0 {
		fmt.Fprintf(&b, "\n✅ Approved and in use: %s.\n", strings.Join(inUse, ", "))
	}
	if len(pending) == 0 {
		b.WriteString("\nNothing waits for approval.")
		return b.String(), ""
	}
	hash = shortHash(setHash(v.files))
	fmt.Fprintf(&b, "\nTo use exactly these files, an owner sends `/extensions approve %s` (or runs `pibot extensions approve %s` on the host). A file changed after that waits again.", hash, hash)
	return b.String(), hash
}

// changed reports whether f replaces an approved file of its path.
func (v wsView) changed(f wsFile) bool {
	if v.rec.Workspace != v.ws {
		return false
	}
	for _, a := range v.rec.Files {
		if a.Kind == f.Kind && a.Path == f.Path {
			return true
		}
	}
	return false
}

// writeFile writes one waiting file of a review.
func writeFile(b *strings.Builder, f wsFile, changed bool) {
	state := "new"
	if changed {
		state = "changed"
	}
	kind := map[string]string{kindContext: "context file", kindSkill: "skill", kindTemplate: "prompt template"}[f.Kind]
	where := ""
	if f.Path != f.Name {
		where = inlineCode(f.Path) + ", "
	}
	fmt.Fprintf(b, "\n- %s %s %s: %s%d bytes, sha256 %s\n", state, kind, inlineCode(f.Name), where, f.Size, inlineCode(f.SHA256[:12]))
	text := strings.TrimSpace(f.body)
	if f.Description != "" {
		text = "description: " + f.Description + "\n---\n" + text
	}
	if r := []rune(text); len(r) > reviewExcerptRunes {
		text = string(r[:reviewExcerptRunes]) + fmt.Sprintf("\n… (%d more characters: read the file before approving)", len(r)-reviewExcerptRunes)
	}
	fc := fence(text)
	fmt.Fprintf(b, "%s\n%s\n%s\n", fc, text, fc)
}

// Approve records the workspace's files as approved by by, if hash (as
// Review gave it) is still the hash of the files now; the answer says
// what happened. Only a failure to write the record is an error.
func (s *Set) Approve(hash, by string) (string, error) {
	v := s.view()
	if len(v.pending()) == 0 {
		return "Nothing waits for approval.", nil
	}
	full := setHash(v.files)
	if hash = strings.ToLower(strings.TrimSpace(hash)); len(hash) < 12 || !strings.HasPrefix(full, hash) {
		return fmt.Sprintf("That is not the list as it is now (`%s`): the workspace files changed, or the hash is mistyped. Send `/extensions` to see them again.", shortHash(full)), nil
	}
	if s.opts.Approvals == "" {
		return "", fmt.Errorf("extensions: approve: no approvals file")
	}
	rec := record{Workspace: v.ws, Hash: full, By: by, At: time.Now().UTC(), Files: v.files}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("extensions: approve: %w", err)
	}
	if err := atomicfile.Write(s.opts.Approvals, append(data, '\n')); err != nil {
		return "", fmt.Errorf("extensions: approve: %w", err)
	}
	s.log.Info("workspace files approved", "by", by, "hash", shortHash(full), "files", len(v.files))
	return fmt.Sprintf("✅ Approved %d workspace file(s) (`%s`): the next run uses them. A new prompt template becomes a command at the next start.", len(v.files), shortHash(full)), nil
}

// inlineCode shows s as one line of code: cut at the first line break and
// at reviewNameRunes, in a backtick run longer than any inside it.
func inlineCode(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > reviewNameRunes {
		s = string(r[:reviewNameRunes]) + "…"
	}
	ticks := strings.Repeat("`", chat.LongestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || len(ticks) > 1 {
		return ticks + " " + s + " " + ticks
	}
	return ticks + s + ticks
}

// fence is a code fence longer than any backtick run in s, so s cannot
// close it.
func fence(s string) string {
	return strings.Repeat("`", max(3, chat.LongestRun(s, '`')+1))
}
