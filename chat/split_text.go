package chat

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
)

// cut is a place to end a paragraph piece (end) and start the next (next).
type cut struct{ end, next int }

// splitParagraph cuts a paragraph at whitespace that no inline markup
// spans (so links, code spans and emphasis stay whole), preferring a
// sentence end. A stretch without such whitespace that does not fit is cut
// as plain text.
func (s *splitter) splitParagraph(n *ast.Paragraph, b []byte, limit int) []string {
	var cuts []cut
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		t, ok := c.(*ast.Text)
		if !ok {
			continue
		}
		for i := t.Segment.Start; i < t.Segment.Stop; i++ {
			if b[i] == ' ' || b[i] == '\t' {
				cuts = append(cuts, cut{i, i + 1})
			}
		}
		if t.SoftLineBreak() || t.HardLineBreak() {
			nl := t.Segment.Stop
			for nl < len(b) && b[nl] != '\n' {
				nl++
			}
			cuts = append(cuts, cut{t.Segment.Stop, nl + 1})
		}
	}
	text := string(b)
	var out []string
	cur := 0
	for cur < len(text) {
		rest := strings.TrimSpace(text[cur:])
		if rest == "" {
			break
		}
		// Rendering never shrinks text by more than markup bytes, so a
		// window of a few times the limit bounds the search.
		window := 16*max(limit, 1) + 256
		if len(rest) <= window && s.measure(rest) <= limit {
			out = append(out, rest)
			break
		}
		lo := sort.Search(len(cuts), func(i int) bool {
			return cuts[i].end > cur && strings.TrimSpace(text[cur:cuts[i].end]) != ""
		})
		if lo == len(cuts) {
			out = append(out, s.degrade(rest, limit)...)
			break
		}
		hi := sort.Search(len(cuts), func(i int) bool { return cuts[i].end-cur > window })
		hi = max(hi, lo+1)
		fits := func(i int) bool { return s.measure(strings.TrimSpace(text[cur:cuts[i].end])) <= limit }
		k := lo + sort.Search(hi-lo, func(i int) bool { return !fits(lo + i) }) - 1
		if k < lo {
			out = append(out, s.degrade(text[cur:cuts[lo].end], limit)...)
			cur = cuts[lo].next
			continue
		}
		best := k
		for i := k; i >= lo && cuts[i].end-cur >= (cuts[k].end-cur)/2; i-- {
			if sentenceEnd(text[cur:cuts[i].end]) && fits(i) {
				best = i
				break
			}
		}
		out = append(out, strings.TrimSpace(text[cur:cuts[best].end]))
		cur = cuts[best].next
	}
	return out
}

// sentenceEnd reports whether s ends a sentence (closing quotes and
// brackets aside).
func sentenceEnd(s string) bool {
	s = strings.TrimRight(s, " \t\n\"')]*_”’")
	r, _ := utf8.DecodeLastRuneInString(s)
	return strings.ContainsRune(".!?;。！？", r)
}

// degrade reduces md to its plain text, escaped as markdown so that it
// renders as that text, and cuts it to fit. It is the last resort that
// keeps every character when structure cannot be kept.
func (s *splitter) degrade(md string, limit int) []string {
	return s.hardSplit(escapeText(renderWith(s.p, md, DialectPlain)), limit)
}

// escapeText escapes plain text as markdown: every ASCII punctuation
// character is backslash-escaped, lines lose indentation.
func escapeText(plain string) string {
	var b strings.Builder
	b.Grow(len(plain) + len(plain)/4)
	for l := range strings.Lines(plain) {
		l = strings.TrimSpace(l)
		for _, c := range l {
			if c < utf8.RuneSelf && unicode.IsPunct(c) || c < utf8.RuneSelf && unicode.IsSymbol(c) {
				b.WriteByte('\\')
			}
			b.WriteRune(c)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// hardSplit cuts escaped text into pieces that fit, at whitespace when
// possible, else between characters, never inside a rune or an escape.
func (s *splitter) hardSplit(text string, limit int) []string {
	var out []string
	for {
		text = strings.TrimSpace(text)
		if text == "" {
			return out
		}
		if utf8.RuneCountInString(text) <= 2*limit+8 && s.measure(text) <= limit {
			return append(out, text)
		}
		var cuts []int
		runes := 0
		for i := 0; i < len(text) && runes <= 2*limit+8; {
			n := 1
			if text[i] == '\\' && i+1 < len(text) && text[i+1] < utf8.RuneSelf {
				n = 2
			} else {
				_, n = utf8.DecodeRuneInString(text[i:])
			}
			i += n
			runes++
			cuts = append(cuts, i)
		}
		fits := func(i int) bool { return s.measure(text[:cuts[i]]) <= limit }
		k := sort.Search(len(cuts), func(i int) bool { return !fits(i) }) - 1
		if k < 0 {
			k = 0
		}
		best := k
		for i := k; i > k/2; i-- {
			if c := text[cuts[i]-1]; c == ' ' || c == '\n' {
				best = i
				break
			}
		}
		out = append(out, strings.TrimSpace(text[:cuts[best]]))
		text = text[cuts[best]:]
	}
}
