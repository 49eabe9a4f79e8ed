package term

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Default terminal size when Config.Size is nil or reports nothing.
const (
	defaultCols = 80
	defaultRows = 24
)

// statusRefresh is how often the stream controller renews the status line
// of a live terminal (an unchanged status is not drawn again).
const statusRefresh = 2 * time.Second

// ANSI control sequences for redrawing.
const (
	ansiClearLine   = "\r\x1b[K" // to column 0, clear the line
	ansiClearScreen = "\x1b[J"   // clear from the cursor to the end of the screen
)

// termSize returns the terminal's columns and rows.
func (a *Adapter) termSize() (cols, rows int) {
	cols, rows = defaultCols, defaultRows
	if a.size != nil {
		if c, r := a.size(); c > 0 && r > 0 {
			cols, rows = c, r
		}
	}
	return cols, rows
}

// redraw replaces old, the text of the message that ends the output
// (printed as old+"\n", so the cursor is at the start of the next line),
// with text: the cursor moves up to the first line that changes, clears
// the screen below and prints the rest of text. It reports false, having
// printed nothing, when the lines to redraw are taller than the screen
// (the cursor cannot reach them); the caller prints the message again
// instead. a.mu is held.
func (a *Adapter) redraw(old, text string) bool {
	cols, height := a.termSize()
	p := commonPrefix(old, text)
	start := strings.LastIndexByte(old[:p], '\n') + 1
	up := screenRows(old[start:], cols)
	if up >= height {
		return false
	}
	a.raw(fmt.Sprintf("\r\x1b[%dA%s", up, ansiClearScreen))
	a.write(text[start:] + "\n")
	return true
}

// commonPrefix is the length of the longest common prefix of x and y.
func commonPrefix(x, y string) int {
	n := min(len(x), len(y))
	for i := range n {
		if x[i] != y[i] {
			return i
		}
	}
	return n
}

// screenRows is how many terminal rows s takes when printed from column 0
// on a terminal cols wide, counting a line that wraps once per row.
func screenRows(s string, cols int) int {
	rows := 0
	for line := range strings.SplitSeq(s, "\n") {
		w := displayWidth(line)
		rows += max(1, (w+cols-1)/cols)
	}
	return rows
}

// displayWidth is the number of columns s takes: ANSI escape sequences take
// none, wide East Asian characters and emoji two, a tab up to the next
// multiple of eight.
func displayWidth(s string) int {
	w := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			i += escapeLen(s[i:])
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\t':
			w += 8 - w%8
		case r < 0x20 || r == 0x7f:
		case isWide(r):
			w += 2
		default:
			w++
		}
	}
	return w
}

// escapeLen is the length of the escape sequence at the start of s (which
// starts with ESC): a CSI sequence up to its final byte, else ESC and one
// more byte.
func escapeLen(s string) int {
	if len(s) < 2 {
		return len(s)
	}
	if s[1] != '[' {
		return 2
	}
	for i := 2; i < len(s); i++ {
		if s[i] >= 0x40 && s[i] <= 0x7e {
			return i + 1
		}
	}
	return len(s)
}

// isWide reports whether r takes two columns on a terminal (the common
// East Asian wide ranges and emoji; an approximation of wcwidth).
func isWide(r rune) bool {
	switch {
	case r >= 0x1100 && r <= 0x115f,
		r >= 0x2e80 && r <= 0xa4cf && r != 0x303f,
		r >= 0xac00 && r <= 0xd7a3,
		r >= 0xf900 && r <= 0xfaff,
		r >= 0xfe30 && r <= 0xfe4f,
		r >= 0xff00 && r <= 0xff60,
		r >= 0xffe0 && r <= 0xffe6,
		r >= 0x1f300 && r <= 0x1f64f,
		r >= 0x1f900 && r <= 0x1f9ff,
		r >= 0x20000 && r <= 0x3fffd:
		return true
	}
	return false
}
