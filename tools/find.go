package tools

import (
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pibot/pibot/llm"
)

// Find is pi's find tool (fd semantics, implemented in Go).
type Find struct {
	ws   *Workspace
	spec llm.ToolSpec
}

// NewFind returns the find tool for ws.
func NewFind(ws *Workspace) *Find { return &Find{ws: ws, spec: loadSpec("find")} }

// Spec describes the tool.
func (t *Find) Spec() llm.ToolSpec { return t.spec }

type findArgs struct {
	Pattern *string  `json:"pattern"`
	Path    *string  `json:"path"`
	Limit   *float64 `json:"limit"`
}

// FindDetails is find's details object.
type FindDetails struct {
	ResultLimitReached int         `json:"resultLimitReached,omitempty"`
	Truncation         *Truncation `json:"truncation,omitempty"`
}

// Execute finds files and directories whose name (or, for a pattern with
// "/", whose path) matches the glob. Hidden files are included; .git is
// skipped. Directories end in "/".
func (t *Find) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a findArgs
	if err := decodeArgs("find", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if a.Pattern == nil {
		return llm.ToolOutput{}, missing("find", "pattern")
	}
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	p := "."
	if a.Path != nil && *a.Path != "" {
		p = *a.Path
	}
	acc := t.ws.call()
	root, err := acc.resolve(p, false)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	limit := 1000
	if a.Limit != nil {
		limit = int(*a.Limit)
	}
	if st, err := acc.stat(root, p); err != nil || !st.IsDir() {
		return llm.ToolOutput{}, failf("Path not found: %s", root)
	}
	pattern := *a.Pattern
	fullPath := strings.Contains(pattern, "/")
	if fullPath && !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "**/") && pattern != "**" {
		pattern = "**/" + pattern
	}
	re, err := globRegexp(pattern)
	if err != nil {
		return llm.ToolOutput{}, failf("Invalid glob pattern %s: %v", *a.Pattern, err)
	}
	results := collect(ctx, acc, root, p, re, fullPath, limit)
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	if len(results) == 0 {
		return textOutput("No files found matching pattern", nil), nil
	}
	tr := truncateHead(strings.Join(results, "\n"), noLineLimit, DefaultMaxBytes)
	var d FindDetails
	var notices []string
	if len(results) >= limit {
		notices = append(notices, itoa(limit)+" results limit reached. Use limit="+itoa(limit*2)+" for more, or refine pattern")
		d.ResultLimitReached = limit
	}
	if tr.Truncated {
		notices = append(notices, formatSize(DefaultMaxBytes)+" limit reached")
		d.Truncation = &tr
	}
	return withNotices(tr.Content, notices, d), nil
}

// collect walks root (orig as the tool was given it) for find.
func collect(ctx context.Context, acc *access, root, orig string, re *regexp.Regexp, fullPath bool, limit int) []string {
	var results []string
	acc.walk(ctx, root, orig, func(p string, d fs.DirEntry) bool { //nolint:errcheck // partial results are fine
		if len(results) >= limit {
			return false
		}
		subject := d.Name()
		if fullPath {
			subject = filepath.ToSlash(p)
		}
		if !re.MatchString(subject) {
			return true
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return true
		}
		rel = filepath.ToSlash(rel)
		if isDir(acc, p, d) {
			rel += "/"
		}
		results = append(results, rel)
		return true
	})
	return results
}

func isDir(acc *access, p string, d fs.DirEntry) bool {
	if d.IsDir() {
		return true
	}
	if d.Type()&fs.ModeSymlink != 0 {
		st, err := acc.stat(p, p)
		return err == nil && st.IsDir()
	}
	return false
}
