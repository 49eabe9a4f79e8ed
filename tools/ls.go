package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pibot/pibot/llm"
)

// Ls is pi's ls tool.
type Ls struct {
	ws   *Workspace
	spec llm.ToolSpec
}

// NewLs returns the ls tool for ws.
func NewLs(ws *Workspace) *Ls { return &Ls{ws: ws, spec: loadSpec("ls")} }

// Spec describes the tool.
func (t *Ls) Spec() llm.ToolSpec { return t.spec }

type lsArgs struct {
	Path  *string  `json:"path"`
	Limit *float64 `json:"limit"`
}

// LsDetails is ls's details object.
type LsDetails struct {
	EntryLimitReached int         `json:"entryLimitReached,omitempty"`
	Truncation        *Truncation `json:"truncation,omitempty"`
}

// Execute lists the directory.
func (t *Ls) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a lsArgs
	if err := decodeArgs("ls", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	p := "."
	if a.Path != nil && *a.Path != "" {
		p = *a.Path
	}
	acc := t.ws.call()
	dir, err := acc.resolve(p, false)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	limit := 500
	if a.Limit != nil {
		limit = int(*a.Limit)
	}
	st, err := acc.stat(dir, p)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return llm.ToolOutput{}, err
		}
		return llm.ToolOutput{}, failf("Path not found: %s", dir)
	}
	if !st.IsDir() {
		return llm.ToolOutput{}, failf("Not a directory: %s", dir)
	}
	f, err := acc.open(dir, p, os.O_RDONLY, 0, false)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return llm.ToolOutput{}, err
		}
		return llm.ToolOutput{}, failf("Cannot read directory: %s", nodeError(err, "scandir", dir).Error())
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return llm.ToolOutput{}, failf("Cannot read directory: %s", nodeError(err, "scandir", dir).Error())
	}
	sort.SliceStable(names, func(i, j int) bool { return collate(strings.ToLower(names[i]), strings.ToLower(names[j])) < 0 })
	var results []string
	limited := false
	for _, n := range names {
		if len(results) >= limit {
			limited = true
			break
		}
		entry := filepath.Join(dir, n)
		if _, err := acc.resolve(entry, false); err != nil {
			continue // what the call may not reach is not listed
		}
		st, err := acc.stat(entry, entry)
		if err != nil {
			continue
		}
		if st.IsDir() {
			n += "/"
		}
		results = append(results, n)
	}
	if len(results) == 0 {
		return textOutput("(empty directory)", nil), nil
	}
	tr := truncateHead(strings.Join(results, "\n"), noLineLimit, DefaultMaxBytes)
	var d LsDetails
	var notices []string
	if limited {
		notices = append(notices, itoa(limit)+" entries limit reached. Use limit="+itoa(limit*2)+" for more")
		d.EntryLimitReached = limit
	}
	if tr.Truncated {
		notices = append(notices, formatSize(DefaultMaxBytes)+" limit reached")
		d.Truncation = &tr
	}
	return withNotices(tr.Content, notices, d), nil
}

// withNotices appends "[a. b]" and returns details only when there are
// notices.
func withNotices(text string, notices []string, details any) llm.ToolOutput {
	if len(notices) == 0 {
		return textOutput(text, nil)
	}
	return textOutput(text+"\n\n["+strings.Join(notices, ". ")+"]", details)
}

// collate approximates JavaScript's localeCompare (CLDR root order) for
// file names: punctuation and symbols, then digits, then letters.
func collate(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if wa, wb := collateWeight(ra), collateWeight(rb); wa != wb {
			if wa < wb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

const punctOrder = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$"

func collateWeight(r rune) int {
	switch {
	case unicode.IsSpace(r):
		return int(r)
	case r < 0x80 && strings.ContainsRune(punctOrder, r):
		return 0x100 + strings.IndexRune(punctOrder, r)
	case r >= '0' && r <= '9':
		return 0x200 + int(r-'0')
	case r >= 'a' && r <= 'z':
		return 0x300 + int(r-'a')
	}
	return 0x400 + int(r)
}
