package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"strings"
	"syscall"
	"unicode"

	"github.com/pibot/pibot/llm"
)

// Edit is pi's edit tool: one or more exact (or fuzzy) unique
// replacements, matched against the original file.
type Edit struct {
	ws   *Workspace
	spec llm.ToolSpec
}

// NewEdit returns the edit tool for ws.
func NewEdit(ws *Workspace) *Edit { return &Edit{ws: ws, spec: loadSpec("edit")} }

// Spec describes the tool.
func (t *Edit) Spec() llm.ToolSpec { return t.spec }

// Replacement is one edit: OldText becomes NewText.
type Replacement struct {
	OldText string `json:"oldText"`
	NewText string `json:"newText"`
}

// EditDetails is edit's details object.
type EditDetails struct {
	Diff             string `json:"diff"`
	FirstChangedLine int    `json:"firstChangedLine,omitempty"`
}

// parseEditArgs applies pi's compatibility shims: edits given as a JSON
// string, and legacy top-level oldText/newText appended to edits.
func parseEditArgs(raw json.RawMessage) (path string, edits []Replacement, err error) {
	var obj map[string]json.RawMessage
	if err := decodeArgs("edit", raw, &obj); err != nil {
		return "", nil, err
	}
	p, ok := obj["path"]
	if !ok || json.Unmarshal(p, &path) != nil {
		return "", nil, missing("edit", "path")
	}
	if e, ok := obj["edits"]; ok {
		var s string
		if json.Unmarshal(e, &s) == nil {
			e = json.RawMessage(s)
		}
		var list []Replacement
		if json.Unmarshal(e, &list) == nil {
			edits = list
		}
	}
	var oldText, newText string
	o, okOld := obj["oldText"]
	n, okNew := obj["newText"]
	if okOld && okNew && json.Unmarshal(o, &oldText) == nil && json.Unmarshal(n, &newText) == nil {
		edits = append(edits, Replacement{OldText: oldText, NewText: newText})
	}
	if len(edits) == 0 {
		return "", nil, failf("Edit tool input is invalid. edits must contain at least one replacement.")
	}
	return path, edits, nil
}

// Execute applies the edits.
func (t *Edit) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	path, edits, err := parseEditArgs(raw)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	acc := t.ws.call()
	abs, err := acc.resolve(path, true)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	unlock, err := t.ws.lock(ctx, abs)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	defer unlock()
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	f, err := acc.open(abs, path, os.O_RDWR, 0, true)
	if err != nil {
		var e *Error
		switch {
		case errors.Is(err, syscall.EISDIR):
			// pi checks access (a directory passes), then fails reading.
			return llm.ToolOutput{}, &Error{Text: "EISDIR: illegal operation on a directory, read", Err: err}
		case errors.As(err, &e):
			return llm.ToolOutput{}, err
		}
		code, _ := errnoCode(err)
		return llm.ToolOutput{}, &Error{Text: "Could not edit file: " + path + ". Error code: " + code + ".", Err: err}
	}
	defer f.Close()
	data, err := readAllCtx(ctx, f)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	content := decodeUTF8(data)
	bom := ""
	if strings.HasPrefix(content, "\uFEFF") {
		bom, content = "\uFEFF", content[len("\uFEFF"):]
	}
	ending := detectLineEnding(content)
	base, updated, err := applyEdits(toLF(content), edits, path)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	final := updated
	if ending == "\r\n" {
		final = strings.ReplaceAll(updated, "\n", "\r\n")
	}
	out := []byte(bom + final)
	undo, err := t.ws.quota.grow(int64(len(data)), int64(len(out)))
	if err != nil {
		return llm.ToolOutput{}, err
	}
	if err := acc.replace(f, abs, out); err != nil {
		undo()
		return llm.ToolOutput{}, err
	}
	diff, first := generateDiff(base, updated, 4)
	return textOutput("Successfully replaced "+itoa(len(edits))+" block(s) in "+path+".",
		EditDetails{Diff: diff, FirstChangedLine: first}), nil
}

// detectLineEnding is CRLF when the first "\r\n" is the first "\n".
func detectLineEnding(s string) string {
	lf := strings.Index(s, "\n")
	crlf := strings.Index(s, "\r\n")
	if lf < 0 || crlf < 0 {
		return "\n"
	}
	if crlf < lf {
		return "\r\n"
	}
	return "\n"
}

func toLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// jsSpace reports whether JavaScript's trimEnd removes r.
func jsSpace(r rune) bool {
	return (unicode.IsSpace(r) && r != 0x85) || r == 0xFEFF
}

// fuzzyNormalize is pi's normalizeForFuzzyMatch without the NFKC step:
// trailing whitespace stripped per line, smart quotes, Unicode dashes and
// special spaces made ASCII.
func fuzzyNormalize(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRightFunc(l, jsSpace)
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 0x2018 && r <= 0x201B:
			return '\''
		case r >= 0x201C && r <= 0x201F:
			return '"'
		case (r >= 0x2010 && r <= 0x2015) || r == 0x2212:
			return '-'
		case r == 0xA0 || (r >= 0x2002 && r <= 0x200A) || r == 0x202F || r == 0x205F || r == 0x3000:
			return ' '
		}
		return r
	}, strings.Join(lines, "\n"))
}

type match struct {
	found, fuzzy bool
	index, size  int
}

// fuzzyFind looks for old in content exactly, then in normalized space.
func fuzzyFind(content, old string) match {
	if i := strings.Index(content, old); i >= 0 {
		return match{found: true, index: i, size: len(old)}
	}
	fc, fo := fuzzyNormalize(content), fuzzyNormalize(old)
	if i := strings.Index(fc, fo); i >= 0 {
		return match{found: true, fuzzy: true, index: i, size: len(fo)}
	}
	return match{}
}

// applyEdits matches every edit against the original (LF) content and
// returns the base content (fuzzy-normalized if any edit needed it) and
// the new content, with pi's error texts.
func applyEdits(content string, edits []Replacement, path string) (string, string, error) {
	n := len(edits)
	norm := make([]Replacement, n)
	for i, e := range edits {
		norm[i] = Replacement{OldText: toLF(e.OldText), NewText: toLF(e.NewText)}
		if norm[i].OldText == "" {
			if n == 1 {
				return "", "", failf("oldText must not be empty in %s.", path)
			}
			return "", "", failf("edits[%d].oldText must not be empty in %s.", i, path)
		}
	}
	base := content
	for _, e := range norm {
		if fuzzyFind(content, e.OldText).fuzzy {
			base = fuzzyNormalize(content)
			break
		}
	}
	type span struct{ edit, index, size int }
	var spans []span
	fuzzyBase := fuzzyNormalize(base)
	for i, e := range norm {
		m := fuzzyFind(base, e.OldText)
		if !m.found {
			if n == 1 {
				return "", "", failf("Could not find the exact text in %s. The old text must match exactly including all whitespace and newlines.", path)
			}
			return "", "", failf("Could not find edits[%d] in %s. The oldText must match exactly including all whitespace and newlines.", i, path)
		}
		if c := strings.Count(fuzzyBase, fuzzyNormalize(e.OldText)); c > 1 {
			if n == 1 {
				return "", "", failf("Found %d occurrences of the text in %s. The text must be unique. Please provide more context to make it unique.", c, path)
			}
			return "", "", failf("Found %d occurrences of edits[%d] in %s. Each oldText must be unique. Please provide more context to make it unique.", c, i, path)
		}
		spans = append(spans, span{i, m.index, m.size})
	}
	sort.SliceStable(spans, func(a, b int) bool { return spans[a].index < spans[b].index })
	for i := 1; i < len(spans); i++ {
		if p, c := spans[i-1], spans[i]; p.index+p.size > c.index {
			return "", "", failf("edits[%d] and edits[%d] overlap in %s. Merge them into one edit or target disjoint regions.", p.edit, c.edit, path)
		}
	}
	out := base
	for i := len(spans) - 1; i >= 0; i-- {
		s := spans[i]
		out = out[:s.index] + norm[s.edit].NewText + out[s.index+s.size:]
	}
	if out == base {
		if n == 1 {
			return "", "", failf("No changes made to %s. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.", path)
		}
		return "", "", failf("No changes made to %s. The replacements produced identical content.", path)
	}
	return base, out, nil
}
