package chat

import (
	"strings"
	"sync"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// minLimit is the smallest limit for which Split guarantees that every
// chunk fits; below it Split still terminates but chunks may exceed.
const minLimit = 16

// Split cuts CommonMark md into chunks whose rendering in d is at most
// limit units long (see Len). It packs whole top-level blocks greedily,
// measured on the rendered output. A block that does not fit alone is cut
// by kind: fenced code on line boundaries, closed and reopened with the
// same info string; lists between items; quotes and list items by their
// content; paragraphs at a sentence end, then at whitespace outside
// inline markup; tables as code blocks by rows. As a last resort a piece
// is reduced to escaped plain text and cut at whitespace or between
// characters, never inside a UTF-8 sequence (so never inside a UTF-16
// surrogate pair). It returns markdown chunks, to be rendered one by one,
// and nil for blank input.
func Split(md string, d Dialect, limit int) []string {
	return NewSplitter(d).Split(md, limit)
}

// Splitter splits like Split and keeps its markdown parser across calls,
// for callers that split again and again (streaming replies). It is safe
// for concurrent use: goldmark keeps each parse's state apart.
type Splitter struct {
	d Dialect
	p parser.Parser
}

// NewSplitter returns a Splitter for dialect d.
func NewSplitter(d Dialect) *Splitter { return &Splitter{d: d, p: newParser()} }

// Splitters hands out one shared Splitter per dialect, made on first use.
// It is safe for concurrent use.
type Splitters struct {
	mu sync.Mutex
	m  map[Dialect]*Splitter
}

// For returns the Splitter for dialect d.
func (ss *Splitters) For(d Dialect) *Splitter {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.m[d]; ok {
		return s
	}
	if ss.m == nil {
		ss.m = map[Dialect]*Splitter{}
	}
	s := NewSplitter(d)
	ss.m[d] = s
	return s
}

// Split is Split(md, d, limit) for the Splitter's dialect d.
func (sp *Splitter) Split(md string, limit int) []string {
	src := normalizeString(md)
	if strings.TrimSpace(src) == "" {
		return nil
	}
	s := &splitter{d: sp.d, p: sp.p}
	defs := refDefs(s.p, src)
	// A streaming reply is split again at every edit and mostly fits one
	// message: measured once, it is its own chunk, not measured again
	// below unless reference definitions were added to it.
	var chunks []string
	if t := trimBlock(src); s.measure(t) <= limit {
		if defs == "" {
			return []string{t}
		}
		chunks = []string{t}
	} else {
		// Cut, its chunks were measured; the check below need not
		// render them again.
		s.sizes = map[string]int{}
		chunks = s.splitBlocks(t, limit)
	}
	if defs == "" && limit < minLimit {
		return chunks
	}
	out := make([]string, 0, len(chunks))
	for _, c := range chunks {
		if defs != "" {
			c += "\n\n" + defs
		}
		if limit >= minLimit && s.measure(c) > limit {
			out = append(out, s.degrade(c, limit)...)
			continue
		}
		out = append(out, c)
	}
	return out
}

// splitter holds the state of one Split call.
type splitter struct {
	d Dialect
	p parser.Parser
	// depth counts nested containers being cut, bounded by maxDepth.
	depth int
	// sizes remembers what measure returned, when not nil.
	sizes map[string]int
}

// maxDepth bounds how deep Split descends into nested quotes and lists
// before it cuts their text as plain text.
const maxDepth = 4

// measure returns the rendered length of md.
func (s *splitter) measure(md string) int {
	if n, ok := s.sizes[md]; ok {
		return n
	}
	n := Len(renderWith(s.p, md, s.d), s.d)
	if s.sizes != nil {
		s.sizes[md] = n
	}
	return n
}

// unit is a top-level block and its source range.
type unit struct {
	node       ast.Node
	start, end int
	size       int // rendered length
}

// split cuts src into chunks of at most limit rendered units.
func (s *splitter) split(src string, limit int) []string {
	src = trimBlock(src)
	if src == "" {
		return nil
	}
	if s.measure(src) <= limit {
		return []string{src}
	}
	return s.splitBlocks(src, limit)
}

// splitBlocks is split for a trimmed src that does not fit.
func (s *splitter) splitBlocks(src string, limit int) []string {
	b := []byte(src)
	doc := s.p.Parse(text.NewReader(b))
	r := newRenderer(s.d, b)
	var units []unit
	for c := doc.FirstChild(); c != nil; c = c.NextSibling() {
		st := lineStart(b, blockStart(c))
		if st < 0 || len(units) > 0 && st <= units[len(units)-1].start {
			if len(units) > 0 {
				units[len(units)-1].size += Len(r.block(c), s.d) + 2
			}
			continue
		}
		if len(units) == 0 {
			st = 0
		}
		units = append(units, unit{node: c, start: st, size: Len(r.block(c), s.d)})
	}
	for i := range units {
		units[i].end = len(src)
		if i+1 < len(units) {
			units[i].end = units[i+1].start
		}
	}
	switch len(units) {
	case 0:
		return s.degrade(src, limit)
	case 1:
		return s.oversized(src, limit)
	}
	var out []string
	first, size := -1, 0
	flush := func(last int) {
		if first < 0 {
			return
		}
		text := trimBlock(src[units[first].start:units[last].end])
		switch {
		case s.measure(text) <= limit:
			out = append(out, text)
		case first == last:
			out = append(out, s.oversized(text, limit)...)
		default:
			for i := first; i <= last; i++ {
				out = append(out, s.split(src[units[i].start:units[i].end], limit)...)
			}
		}
		first, size = -1, 0
	}
	for i, u := range units {
		if first >= 0 && size+2+u.size > limit {
			flush(i - 1)
		}
		if first < 0 {
			first, size = i, u.size
		} else if u.size > 0 {
			size += 2 + u.size
		}
	}
	flush(len(units) - 1)
	return out
}

// oversized cuts one top-level block that does not fit alone.
func (s *splitter) oversized(md string, limit int) []string {
	b := []byte(md)
	n := s.p.Parse(text.NewReader(b)).FirstChild()
	if n == nil || n.NextSibling() != nil {
		return s.degrade(md, limit)
	}
	switch n := n.(type) {
	case *ast.FencedCodeBlock:
		fence := fenceOf(strings.TrimLeft(md, " "))
		if fence == "" {
			fence = "```"
		}
		info := ""
		if n.Info != nil {
			info = string(n.Info.Value(b))
		}
		return s.splitCode(fence, info, blockLines(n, b), limit)
	case *ast.CodeBlock:
		return s.splitCode("```", "", blockLines(n, b), limit)
	case *east.Table:
		return s.splitCode("```", "", tableText(n, b), limit)
	case *ast.List:
		return s.splitList(n, b, limit)
	case *ast.Blockquote:
		return s.splitQuote(md, limit)
	case *ast.Paragraph:
		return s.splitParagraph(n, b, limit)
	}
	return s.degrade(md, limit)
}

// blockStart returns the source offset where block n begins, or -1.
func blockStart(n ast.Node) int {
	if p := n.Pos(); p >= 0 {
		return p
	}
	if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
		return n.Lines().At(0).Start
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if p := blockStart(c); p >= 0 {
			return p
		}
	}
	return -1
}

// lineStart returns the start of the line holding offset p (-1 stays -1).
func lineStart(b []byte, p int) int {
	if p < 0 {
		return -1
	}
	p = min(p, len(b))
	for p > 0 && b[p-1] != '\n' {
		p--
	}
	return p
}

// trimBlock trims blank lines before and whitespace after a block.
func trimBlock(s string) string {
	return strings.TrimRight(strings.TrimLeft(s, "\n"), " \t\n")
}

// refDefs returns the source of every link reference definition in src,
// one per line, so that each chunk can resolve reference links.
func refDefs(p parser.Parser, src string) string {
	if !strings.Contains(src, "]:") {
		return ""
	}
	b := []byte(src)
	var defs []string
	_ = ast.Walk(p.Parse(text.NewReader(b)), func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if d, ok := n.(*ast.LinkReferenceDefinition); ok && entering {
			defs = append(defs, strings.TrimSpace(blockLines(d, b)))
			return ast.WalkSkipChildren, nil
		}
		if n.Type() == ast.TypeInline {
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return strings.Join(defs, "\n")
}
