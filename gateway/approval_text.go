package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/chat"
)

// Bounds of an approval message.
const (
	approvalTargetRunes  = 300 // a path or a command's first line
	approvalExcerptRunes = 600 // the excerpt below the summary
)

// text is the approval message of ap: first what the call
// touches (paths, a command's first line) and how much (bytes, lines),
// each on a line of its own, then a bounded excerpt of the arguments. No
// amount of content can push the target out of the message.
func (a *approvals) text(ap *approval, paths []ToolPath) string {
	var b strings.Builder
	fmt.Fprintf(&b, "🔐 **Approve `%s`?**\n", ap.Tool)
	for _, p := range paths {
		shown := p.Path
		if p.Inside {
			if rel, err := filepath.Rel(cmp.Or(ap.workspace, a.def.workspace), p.Path); err == nil {
				shown = rel
			}
		}
		fmt.Fprintf(&b, "\n- target: %s", inlineCode(shown))
		if !p.Inside {
			b.WriteString(" — **outside the workspace**")
		}
	}
	var args map[string]any
	_ = json.Unmarshal(ap.Args, &args)
	excerpt := ""
	if cmd, ok := args["command"].(string); ok {
		first, _, _ := strings.Cut(strings.TrimLeft(cmd, "\n"), "\n")
		fmt.Fprintf(&b, "\n- command: %s\n- size: %s", inlineCode(first), size(cmd))
		excerpt = cmd
	}
	if content, ok := args["content"].(string); ok {
		fmt.Fprintf(&b, "\n- content: %s", size(content))
		excerpt = content
	}
	if edits, n := editSize(args); n > 0 {
		fmt.Fprintf(&b, "\n- edits: %d, new text %s", n, size(edits))
		excerpt = edits
	}
	if ap.Outside {
		b.WriteString("\n\nOnly an owner can allow this; the person who asked can deny it.")
	}
	if excerpt == "" {
		var buf bytes.Buffer
		if json.Indent(&buf, ap.Args, "", "  ") == nil {
			excerpt = buf.String()
		} else {
			excerpt = string(ap.Args)
		}
	}
	if r := []rune(excerpt); len(r) > approvalExcerptRunes {
		excerpt = string(r[:approvalExcerptRunes]) + fmt.Sprintf("\n… (%d more characters)", len(r)-approvalExcerptRunes)
	}
	f := fence(excerpt)
	fmt.Fprintf(&b, "\n\n%s\n%s\n%s", f, excerpt, f)
	return b.String()
}

// editSize joins the new texts of an edit call and counts its edits.
func editSize(args map[string]any) (string, int) {
	var parts []string
	if s, ok := args["newText"].(string); ok {
		parts = append(parts, s)
	}
	list, _ := args["edits"].([]any)
	if s, ok := args["edits"].(string); ok {
		_ = json.Unmarshal([]byte(s), &list)
	}
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			if s, ok := m["newText"].(string); ok {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n"), len(parts)
}

// size says how long s is, in bytes and lines.
func size(s string) string {
	lines := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		lines++
	}
	return fmt.Sprintf("%d bytes, %d lines", len(s), lines)
}

// inlineCode shows s as one line of code: cut at the first line break and
// at approvalTargetRunes, in a backtick run longer than any inside it.
func inlineCode(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i] + " …"
	}
	if r := []rune(s); len(r) > approvalTargetRunes {
		s = string(r[:approvalTargetRunes]) + "…"
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
