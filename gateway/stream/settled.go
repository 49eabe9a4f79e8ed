package stream

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// settled returns the length of the head of md, an assistant message still
// being written, that a stream which can only append may show now: the
// head ends at a word boundary (before a space or a line break, or after
// sentence punctuation of scripts written without spaces) and its
// rendering does not change as md grows. What could still change is held
// back:
//
//   - a fenced code block, from its opening line until its closing fence
//     line is complete;
//   - a line from its first "|" (outside code) until the next line is
//     complete and is not a table's delimiter row; the rows of a table
//     until each is complete;
//   - an open code span, emphasis, strikethrough, link or image, until it
//     closes or its paragraph ends;
//   - a line's block markers ("- ", "1. ", "> ", "## "), and a line that
//     is only markdown punctuation ("***"), until a word follows;
//   - the word being written.
//
// A blank line outside a code block settles everything before it. The
// result grows with md: a head that is settled stays settled. A paragraph
// line turned into a heading by a setext underline ("===" or "---" on the
// next line) is the one change of rendering it does not foresee.
func settled(md string) int {
	var s settler
	s.md = md
	pos := 0
	for pos < len(md) {
		end := strings.IndexByte(md[pos:], '\n')
		if end < 0 {
			s.partial(pos)
			break
		}
		s.line(pos, pos+end)
		pos += end + 1
	}
	return s.best
}

// settler follows md line by line for settled.
type settler struct {
	md   string
	best int // the longest settled head found so far
	f    fence
	in   inline
	// table: the lines above are a table's header and delimiter row;
	// until a blank line every line is one of its rows.
	table bool
	// pending: the last complete line has a "|" and may be a table's
	// header; cut is where it ends if its paragraph is settled there, -1
	// if not.
	pending bool
	cut     int
}

// line takes the complete line md[start:end] (end is its '\n').
func (s *settler) line(start, end int) {
	t := strings.TrimRight(s.md[start:end], "\r")
	if s.pending {
		s.pending = false
		if delimRow().MatchString(t) {
			s.table, s.best, s.in = true, end, inline{}
			return
		}
		s.best = max(s.best, s.cut) // the line above is prose
	}
	wasOpen := s.f.open != ""
	s.f.feed(t)
	switch {
	case wasOpen:
		if s.f.open == "" { // the closing fence: the block is complete
			s.best, s.in = end, inline{}
		}
		return
	case s.f.open != "": // an opening fence
		s.in, s.table, s.pending = inline{}, false, false
		return
	case strings.TrimSpace(t) == "":
		s.best, s.in, s.table, s.pending = end, inline{}, false, false
		return
	case s.table:
		s.best, s.in = end, inline{}
		return
	}
	pipe := s.words(start, end)
	switch {
	case pipe:
		s.pending, s.cut = true, -1
		if s.in.closed() {
			s.cut = end
		}
	case isHeading(t):
		s.best, s.in = end, inline{}
	case s.in.closed():
		s.best = end
	}
}

// partial takes the last line, md[start:], still being written.
func (s *settler) partial(start int) {
	t := s.md[start:]
	if s.pending && strings.Trim(t, " \t|:-") != "" {
		// It cannot become a delimiter row: the line above is prose.
		s.pending, s.best = false, max(s.best, s.cut)
	}
	if s.f.open != "" || s.table || s.pending || fenceStart(t) {
		return
	}
	s.words(start, len(s.md))
}

// words scans the line md[start:end] (without its line ending) for the
// inline constructs it opens and closes, and settles the head of md up to
// each word boundary where none is open. It reports whether the line has
// a "|" outside code; no boundary after it settles. Nor does one in a
// line that starts like a fence: cut short, it could become one.
func (s *settler) words(start, end int) (pipe bool) {
	md := s.md
	i := start + markers(md[start:end])
	content := false
	hold := fenceStart(md[start:end])
	for i < end {
		c := md[i]
		switch {
		case c == ' ' || c == '\t':
			if content && !pipe && !hold && s.in.closed() {
				s.best = i
			}
			i++
			continue
		case c == '|' && s.in.code == 0:
			pipe = true
		}
		if !content && strings.IndexByte(markup, c) < 0 {
			content = true
		}
		next := s.in.scan(md, i, end)
		if c >= utf8.RuneSelf && content && !pipe && !hold && s.in.closed() {
			if r, _ := utf8.DecodeRuneInString(md[i:]); isStop(r) {
				s.best = next
			}
		}
		i = next
	}
	return pipe
}

// markup are the characters that alone make no word: a line of them may
// be a thematic break, a setext underline or a fence.
const markup = "*-_=+#>|~`:.)"

// markers returns the length of the block markers at the start of line:
// indentation, block quote markers, list item markers and an ATX heading's
// hashes, with the spaces after them.
func markers(line string) int {
	i := 0
	for {
		j := i
		for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
			j++
		}
		k := j
		switch {
		case k < len(line) && line[k] == '>':
			k++
		case k < len(line) && strings.IndexByte("-*+", line[k]) >= 0:
			k++
		case k < len(line) && line[k] == '#':
			for k < len(line) && line[k] == '#' {
				k++
			}
		case k < len(line) && line[k] >= '0' && line[k] <= '9':
			for k < len(line) && line[k] >= '0' && line[k] <= '9' {
				k++
			}
			if k == len(line) || (line[k] != '.' && line[k] != ')') {
				return j
			}
			k++
		default:
			return j
		}
		// A marker is followed by a space (or ends the line; '>' needs
		// none).
		if k < len(line) && line[k] != ' ' && line[k] != '\t' && line[j] != '>' {
			return j
		}
		i = k
	}
}

// isHeading reports whether line is an ATX heading, a block of one line.
func isHeading(line string) bool {
	t := strings.TrimLeft(line, " ")
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && (n == len(t) || t[n] == ' ' || t[n] == '\t')
}

// fenceStart reports whether a line being written may become a fence
// line: it starts (after at most three spaces) with three backticks or
// tildes.
func fenceStart(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// delimRow matches a table's delimiter row: "|---|:--:|", "--- | ---".
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var delimRow = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$`)
})

// isStop reports sentence or clause punctuation of scripts that do not
// separate words by spaces: a word boundary after it.
func isStop(r rune) bool {
	return strings.ContainsRune("。、，！？；：", r)
}

// inline follows the inline constructs open in a paragraph: a code span,
// emphasis and strikethrough delimiters, and link or image brackets.
type inline struct {
	code     int     // length of the backtick run of an open code span; 0 if none
	delims   []delim // emphasis and strikethrough openers not yet closed
	brackets int     // "[" not yet closed by "]"
	dest     int     // depth of parentheses in a link destination; 0 if none
	// full: more openers than maxOpeners were open at once; the rest of
	// the paragraph is held (and the search for an opener stays short).
	full bool
}

// maxOpeners bounds the emphasis openers followed in one paragraph.
const maxOpeners = 64

// delim is an emphasis or strikethrough opener: its character and how many
// of it are still open.
type delim struct {
	ch byte
	n  int
}

// closed reports whether nothing is open.
func (in *inline) closed() bool {
	return in.code == 0 && len(in.delims) == 0 && in.brackets == 0 && in.dest == 0 && !in.full
}

// scan takes the construct that starts at md[i] (a delimiter run, a
// bracket, an escape or a plain rune) and returns where the next starts.
// md[:end] is the line; what follows end is read only to classify a
// delimiter run at the end of the line.
func (in *inline) scan(md string, i, end int) int {
	c := md[i]
	if in.code > 0 {
		if c != '`' {
			_, n := utf8.DecodeRuneInString(md[i:])
			return i + n
		}
		j := run(md, i, end)
		if j-i == in.code {
			in.code = 0
		}
		return j
	}
	switch c {
	case '\\':
		if i+1 < end {
			_, n := utf8.DecodeRuneInString(md[i+1:])
			return i + 1 + n
		}
		return i + 1
	case '`':
		j := run(md, i, end)
		in.code = j - i
		return j
	case '[':
		in.brackets++
	case '!':
		if i+1 < end && md[i+1] == '[' {
			in.brackets++
			return i + 2
		}
	case ']':
		if in.brackets > 0 {
			in.brackets--
			if i+1 < end && md[i+1] == '(' {
				in.dest = 1
				return i + 2
			}
		}
	case '(':
		if in.dest > 0 {
			in.dest++
		}
	case ')':
		if in.dest > 0 {
			in.dest--
		}
	case '*', '_', '~':
		if in.dest == 0 {
			j := run(md, i, end)
			in.delimiter(md, i, j)
			return j
		}
	}
	_, n := utf8.DecodeRuneInString(md[i:])
	return i + n
}

// run returns the end of the run of md[i]'s byte that starts at i, within
// md[:end].
func run(md string, i, end int) int {
	j := i
	for j < end && md[j] == md[i] {
		j++
	}
	return j
}

// delimiter takes the delimiter run md[i:j]: it closes openers of its
// character and may open; following CommonMark's flanking rules.
func (in *inline) delimiter(md string, i, j int) {
	c, n := md[i], j-i
	if c == '~' && n > 2 {
		return // not strikethrough
	}
	before, after := ' ', ' '
	if i > 0 {
		before, _ = utf8.DecodeLastRuneInString(md[:i])
	}
	if j < len(md) {
		after, _ = utf8.DecodeRuneInString(md[j:])
	}
	left := !unicode.IsSpace(after) && (!isPunct(after) || unicode.IsSpace(before) || isPunct(before))
	right := !unicode.IsSpace(before) && (!isPunct(before) || unicode.IsSpace(after) || isPunct(after))
	canOpen, canClose := left, right
	if c == '_' {
		canOpen = left && (!right || isPunct(before))
		canClose = right && (!left || isPunct(after))
	}
	for canClose && n > 0 {
		k := len(in.delims) - 1
		for k >= 0 && in.delims[k].ch != c {
			k--
		}
		if k < 0 || (c == '~' && in.delims[k].n != n) {
			break
		}
		m := min(in.delims[k].n, n)
		in.delims[k].n -= m
		n -= m
		// Openers inside the closed span can no longer close.
		in.delims = in.delims[:k+1]
		if in.delims[k].n == 0 {
			in.delims = in.delims[:k]
		}
	}
	switch {
	case !canOpen || n == 0:
	case len(in.delims) >= maxOpeners:
		in.full = true
	default:
		in.delims = append(in.delims, delim{ch: c, n: n})
	}
}

// isPunct reports Unicode punctuation or symbols, as CommonMark's flanking
// rules count them.
func isPunct(r rune) bool { return unicode.IsPunct(r) || unicode.IsSymbol(r) }
