package term

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pibot/pibot/chat"
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

// display is what the terminal shows, and the cursor: the bot messages
// still editable, the message that ends the output, the numbered buttons,
// the status line and the prompt of the line editor. Its mutex guards it
// all: output and typing never interleave. Methods marked "d.mu is held"
// are called with it held.
type display struct {
	out   io.Writer
	color bool
	live  bool
	size  func() (int, int)
	log   *slog.Logger

	mu     sync.Mutex
	msgs   map[string]*shown
	order  []string // message ids, oldest first
	tail   string   // message whose text ends the output, "" if none
	midLn  bool     // the output does not end with a newline
	status string   // last status line printed
	// keys are the numbered buttons on screen, from the latest message
	// that has buttons.
	keys   []chat.Button
	keyMsg chat.MsgRef
	// line is the line editor's state (Config.Edit).
	line editor
	// statusRows is how many rows the transient status line of a live
	// terminal takes at the end of the output (0: none shown).
	statusRows int
	// streaming is the message of an open stream, "" if none.
	streaming string
}

// shown is what the terminal shows of one bot message.
type shown struct {
	markdown string
	text     string // rendered
	buttons  [][]chat.Button
}

// printLocked records and prints a new message. d.mu is held.
func (d *display) printLocked(ref chat.MsgRef, m *shown) {
	d.msgs[ref.ID] = m
	d.order = append(d.order, ref.ID)
	if len(d.order) > maxMessages {
		delete(d.msgs, d.order[0])
		d.order = d.order[1:]
	}
	d.newLine()
	d.write(m.text + "\n")
	d.tail = ref.ID
	d.showButtons(ref, m.buttons)
}

// showButtons prints numbered buttons and makes them the active ones.
// d.mu is held.
func (d *display) showButtons(ref chat.MsgRef, rows [][]chat.Button) {
	var keys []chat.Button
	for _, row := range rows {
		keys = append(keys, row...)
	}
	if len(keys) == 0 {
		return
	}
	labels := make([]string, len(keys))
	for i, b := range keys {
		labels[i] = fmt.Sprintf("[%d] %s", i+1, b.Label)
	}
	d.newLine()
	d.write(strings.Join(labels, "  ") + "\n")
	d.tail = ""
	d.keys, d.keyMsg = keys, ref
}

// write prints text; a write error is logged (the terminal is gone, and the
// caller can do nothing about it). d.mu is held.
func (d *display) write(text string) {
	if text == "" {
		return
	}
	if _, err := io.WriteString(d.out, text); err != nil {
		d.log.Warn("term: write", "err", err)
	}
	d.midLn = !strings.HasSuffix(text, "\n")
}

// newLine ends a partial line, and ends the streamed message. d.mu is held.
func (d *display) newLine() {
	if d.midLn {
		d.write("\n")
	}
	d.tail = ""
}

// note prints one line of the adapter's own, dimmed when colored. d.mu is
// held.
func (d *display) note(text string) {
	if d.color {
		text = ansiDim + text + ansiReset
	}
	d.write(text + "\n")
}

// termSize returns the terminal's columns and rows.
func (d *display) termSize() (cols, rows int) {
	cols, rows = defaultCols, defaultRows
	if d.size != nil {
		if c, r := d.size(); c > 0 && r > 0 {
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
// instead. d.mu is held.
func (d *display) redraw(old, text string) bool {
	cols, height := d.termSize()
	p := commonPrefix(old, text)
	start := strings.LastIndexByte(old[:p], '\n') + 1
	up := screenRows(old[start:], cols)
	if up >= height {
		return false
	}
	d.raw(fmt.Sprintf("\r\x1b[%dA%s", up, ansiClearScreen))
	d.write(text[start:] + "\n")
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
