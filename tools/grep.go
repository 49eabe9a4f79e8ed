package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pibot/pibot/llm"
)

// Grep is pi's grep tool (ripgrep semantics, implemented in Go with RE2
// regular expressions).
type Grep struct {
	ws   *Workspace
	spec llm.ToolSpec
}

// NewGrep returns the grep tool for ws.
func NewGrep(ws *Workspace) *Grep { return &Grep{ws: ws, spec: loadSpec("grep")} }

// Spec describes the tool.
func (t *Grep) Spec() llm.ToolSpec { return t.spec }

type grepArgs struct {
	Pattern    *string  `json:"pattern"`
	Path       *string  `json:"path"`
	Glob       string   `json:"glob"`
	IgnoreCase bool     `json:"ignoreCase"`
	Literal    bool     `json:"literal"`
	Context    *float64 `json:"context"`
	Limit      *float64 `json:"limit"`
}

// GrepDetails is grep's details object.
type GrepDetails struct {
	MatchLimitReached int         `json:"matchLimitReached,omitempty"`
	Truncation        *Truncation `json:"truncation,omitempty"`
	LinesTruncated    bool        `json:"linesTruncated,omitempty"`
}

// Execute searches file contents.
func (t *Grep) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a grepArgs
	if err := decodeArgs("grep", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if a.Pattern == nil {
		return llm.ToolOutput{}, missing("grep", "pattern")
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
	st, err := acc.stat(root, p)
	if err != nil {
		return llm.ToolOutput{}, failf("Path not found: %s", root)
	}
	expr := *a.Pattern
	if a.Literal {
		expr = regexp.QuoteMeta(expr)
	}
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return llm.ToolOutput{}, failf("regex parse error: %v", err)
	}
	var globRe *regexp.Regexp
	if a.Glob != "" {
		if globRe, err = globRegexp(a.Glob); err != nil {
			return llm.ToolOutput{}, failf("Invalid glob %s: %v", a.Glob, err)
		}
	}
	ctxLines := 0
	if a.Context != nil && *a.Context > 0 {
		ctxLines = int(*a.Context)
	}
	limit := 100
	if a.Limit != nil {
		limit = int(*a.Limit)
	}
	limit = max(1, limit)

	s := grepRun{acc: acc, re: re, ctxLines: ctxLines, limit: limit}
	if st.IsDir() {
		acc.walk(ctx, root, p, func(fp string, d fs.DirEntry) bool { //nolint:errcheck // partial results are fine
			if d.IsDir() || !d.Type().IsRegular() {
				return true
			}
			rel, _ := filepath.Rel(root, fp)
			rel = filepath.ToSlash(rel)
			if globRe != nil {
				subject := rel
				if !strings.Contains(a.Glob, "/") {
					subject = d.Name()
				}
				if !globRe.MatchString(subject) {
					return true
				}
			}
			return s.file(fp, rel)
		})
	} else {
		s.file(root, filepath.Base(root))
	}
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	if s.matches == 0 {
		return textOutput("No matches found", nil), nil
	}
	tr := truncateHead(strings.Join(s.out, "\n"), noLineLimit, DefaultMaxBytes)
	var d GrepDetails
	var notices []string
	if s.limitReached {
		notices = append(notices, itoa(limit)+" matches limit reached. Use limit="+itoa(limit*2)+" for more, or refine pattern")
		d.MatchLimitReached = limit
	}
	if tr.Truncated {
		notices = append(notices, formatSize(DefaultMaxBytes)+" limit reached")
		d.Truncation = &tr
	}
	if s.linesTruncated {
		notices = append(notices, "Some lines truncated to "+itoa(GrepMaxLineLength)+" chars. Use read tool to see full lines")
		d.LinesTruncated = true
	}
	return withNotices(tr.Content, notices, d), nil
}

type grepRun struct {
	acc            *access
	re             *regexp.Regexp
	ctxLines       int
	limit          int
	matches        int
	limitReached   bool
	linesTruncated bool
	out            []string
}

// file searches one file; it returns false once the match limit is hit.
// Binary files (with a NUL byte) are skipped, as ripgrep does.
func (s *grepRun) file(path, rel string) bool {
	data, err := s.acc.readFile(path, rel)
	if err != nil || bytes.IndexByte(data, 0) >= 0 {
		return true
	}
	text := toLF(decodeUTF8(data))
	lines := strings.Split(text, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		if !s.re.MatchString(l) {
			continue
		}
		s.matches++
		s.block(lines, rel, i+1)
		if s.matches >= s.limit {
			s.limitReached = true
			return false
		}
	}
	return true
}

func (s *grepRun) block(lines []string, rel string, n int) {
	start, end := n, n
	if s.ctxLines > 0 {
		start, end = max(1, n-s.ctxLines), min(len(lines), n+s.ctxLines)
	}
	for cur := start; cur <= end; cur++ {
		text, cut := truncateLine(strings.ReplaceAll(lines[cur-1], "\r", ""), GrepMaxLineLength)
		if cut {
			s.linesTruncated = true
		}
		if cur == n {
			s.out = append(s.out, rel+":"+itoa(cur)+": "+text)
		} else {
			s.out = append(s.out, rel+"-"+itoa(cur)+"- "+text)
		}
	}
}
