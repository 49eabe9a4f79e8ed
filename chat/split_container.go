package chat

import (
	"strings"

	"github.com/yuin/goldmark/ast"
)

// splitList cuts a list between items; an item too long alone is cut by
// its content.
func (s *splitter) splitList(n *ast.List, src []byte, limit int) []string {
	var starts []int
	for it := n.FirstChild(); it != nil; it = it.NextSibling() {
		st := lineStart(src, blockStart(it))
		if st < 0 || len(starts) > 0 && st <= starts[len(starts)-1] {
			continue
		}
		if len(starts) == 0 {
			st = 0
		}
		starts = append(starts, st)
	}
	if len(starts) < 2 {
		return s.splitItem(string(src), limit)
	}
	sep := 1
	if !n.IsTight {
		sep = 2
	}
	var out []string
	first, size := -1, 0
	flush := func(last int) {
		if first < 0 {
			return
		}
		end := len(src)
		if last+1 < len(starts) {
			end = starts[last+1]
		}
		text := trimBlock(string(src[starts[first]:end]))
		switch {
		case s.measure(text) <= limit:
			out = append(out, text)
		case first == last:
			out = append(out, s.splitItem(text, limit)...)
		default:
			for i := first; i <= last; i++ {
				e := len(src)
				if i+1 < len(starts) {
					e = starts[i+1]
				}
				out = append(out, s.split(string(src[starts[i]:e]), limit)...)
			}
		}
		first, size = -1, 0
	}
	for i, st := range starts {
		end := len(src)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		n := s.measure(trimBlock(string(src[st:end])))
		if first >= 0 && size+sep+n > limit {
			flush(i - 1)
		}
		if first < 0 {
			first, size = i, n
		} else {
			size += sep + n
		}
	}
	flush(len(starts) - 1)
	return out
}

// splitItem cuts one list item: its content is split on its own, the
// first piece keeps the item marker and the others follow as plain blocks.
func (s *splitter) splitItem(text string, limit int) []string {
	marker := itemMarker(text)
	if marker == 0 {
		return s.degrade(text, limit)
	}
	inner := dedent(text[marker:], marker)
	head, indent := text[:marker], strings.Repeat(" ", marker)
	return s.fitContainer(inner, limit, func(piece string, i int) string {
		if i > 0 {
			return piece
		}
		return head + prefixLines(piece, "", indent)
	})
}

// splitQuote cuts a block quote by its content, quoting every piece.
func (s *splitter) splitQuote(text string, limit int) []string {
	var b strings.Builder
	for l := range strings.Lines(text) {
		t := strings.TrimLeft(l, " ")
		if len(l)-len(t) <= 3 && strings.HasPrefix(t, ">") {
			t = strings.TrimPrefix(t[1:], " ")
			l = t
		}
		b.WriteString(l)
	}
	return s.fitContainer(b.String(), limit, func(piece string, _ int) string {
		return prefixLines(piece, "> ", "> ")
	})
}

// fitContainer splits inner content with a budget reduced by the
// container's overhead, wraps each piece, and shrinks the budget while a
// wrapped piece still overflows.
func (s *splitter) fitContainer(inner string, limit int, wrap func(piece string, i int) string) []string {
	if strings.TrimSpace(inner) == "" {
		return nil
	}
	if s.depth >= maxDepth {
		return s.degrade(wrap(inner, 0), limit)
	}
	s.depth++
	defer func() { s.depth-- }()
	budget := limit - max(0, s.measure(wrap("x", 0))-s.measure("x"))
	var out []string
	for try := 0; ; try++ {
		pieces := s.split(inner, max(budget, 1))
		out = out[:0]
		over := 0
		for i, p := range pieces {
			w := wrap(p, i)
			over = max(over, s.measure(w)-limit)
			out = append(out, w)
		}
		if over <= 0 || try == 1 || budget <= 1 {
			return out
		}
		budget -= over
	}
}

// itemMarker returns the byte length of the list marker and the spaces
// after it on the first line of text, or 0 if there is none.
func itemMarker(text string) int {
	i := 0
	for i < len(text) && i < 3 && text[i] == ' ' {
		i++
	}
	switch {
	case i < len(text) && strings.IndexByte("-+*", text[i]) >= 0:
		i++
	default:
		d := i
		for i < len(text) && i-d < 9 && text[i] >= '0' && text[i] <= '9' {
			i++
		}
		if i == d || i >= len(text) || (text[i] != '.' && text[i] != ')') {
			return 0
		}
		i++
	}
	sp := 0
	for i+sp < len(text) && text[i+sp] == ' ' && sp < 4 {
		sp++
	}
	if i+sp < len(text) && text[i+sp] != '\n' && sp == 0 {
		return 0
	}
	if sp == 4 {
		sp = 1
	}
	return i + sp
}

// dedent removes up to n leading spaces from every line after the first.
func dedent(s string, n int) string {
	var b strings.Builder
	first := true
	for l := range strings.Lines(s) {
		if !first {
			k := 0
			for k < n && k < len(l) && l[k] == ' ' {
				k++
			}
			l = l[k:]
		}
		first = false
		b.WriteString(l)
	}
	return b.String()
}
