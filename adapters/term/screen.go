package term

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
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
// still editable, the blocks at the end of a live terminal's output, the
// numbered buttons, the status line and the prompt of the line editor.
// Its mutex guards it all: output and typing never interleave. Methods
// marked "d.mu is held" are called with it held.
type display struct {
	out   io.Writer
	color bool
	live  bool
	size  func() (int, int)
	log   *slog.Logger

	mu    sync.Mutex
	msgs  map[string]*shown
	order []string // message ids, oldest first
	// tail is the end of a live terminal's output (blocks.go).
	tail   tail
	status string // last status line printed
	// keys are the numbered buttons on screen, from the latest message
	// that has buttons.
	keys   []chat.Button
	keyMsg chat.MsgRef
	// line is the line editor's state (Config.Edit).
	line editor
	// statusRows is how many rows the transient status line of a live
	// terminal takes at the end of the output (0: none shown).
	statusRows int
	// toast means the transient line shows a toast, which stays until
	// the next output or status.
	toast bool
}

// shown is what the terminal shows of one bot message.
type shown struct {
	markdown string
	text     string // rendered
	buttons  [][]chat.Button
}

// put shows message ref, new or changed, as m. On a live terminal the
// message, with its buttons, is one block, redrawn in place (or, when the
// cursor cannot reach it any more, printed again); open marks a reply still
// streaming. Elsewhere a new message is printed whole and a changed one
// prints what changed: its new text, its new buttons. d.mu is held.
func (d *display) put(ref chat.MsgRef, m shown, open bool) {
	old, isNew := d.msgs[ref.ID], false
	if old == nil {
		old, isNew = &shown{}, true
		d.msgs[ref.ID] = old
		d.order = append(d.order, ref.ID)
		if len(d.order) > maxMessages {
			delete(d.msgs, d.order[0])
			d.order = d.order[1:]
		}
	}
	text := blockText(m)
	switch i := d.tail.find(ref.ID); {
	case !d.live:
		d.printChange(*old, m, isNew)
	case i >= 0:
		if b := d.tail.blocks[i]; b.text != text || b.open != open {
			d.tail.replace(i, text, open)
		}
	case isNew || blockText(*old) != text:
		d.tail.add(block{id: ref.ID, text: text, open: open})
	}
	if !equalButtons(old.buttons, m.buttons) {
		if keys := slices.Concat(m.buttons...); len(keys) > 0 {
			d.keys, d.keyMsg = keys, ref
		} else if d.keyMsg.ID == ref.ID {
			d.keys = nil
		}
	}
	*old = m
}

// printChange prints message m, new or changed from old, where the
// terminal cannot redraw: all of it when new, else its new text and its
// new buttons. d.mu is held.
func (d *display) printChange(old, m shown, isNew bool) {
	if isNew {
		d.raw(blockText(m) + "\n")
		return
	}
	if m.text != old.text {
		d.raw(m.text + "\n")
	}
	if line := buttonsLine(m.buttons); line != "" && !equalButtons(old.buttons, m.buttons) {
		d.raw(line + "\n")
	}
}

// blockText is how message m is printed: its text, and its buttons on a
// line below it.
func blockText(m shown) string {
	if line := buttonsLine(m.buttons); line != "" {
		return m.text + "\n" + line
	}
	return m.text
}

// buttonsLine numbers the buttons of rows, "[1] Allow once  [2] Deny"; ""
// when there are none.
func buttonsLine(rows [][]chat.Button) string {
	var labels []string
	for _, row := range rows {
		for _, b := range row {
			labels = append(labels, fmt.Sprintf("[%d] %s", len(labels)+1, b.Label))
		}
	}
	return strings.Join(labels, "  ")
}

// note prints one line of the adapter's own, dimmed when colored. d.mu is
// held.
func (d *display) note(text string) {
	if d.color {
		text = ansiDim + text + ansiReset
	}
	if d.live {
		d.tail.add(block{text: text})
		return
	}
	d.raw(text + "\n")
}

// transient shows line on a live terminal's status line, below the
// output; the prompt and the previous status line are off the screen.
// d.mu is held.
func (d *display) transient(line string) {
	cols, _ := d.termSize()
	d.statusRows = screenRows(line, cols)
	if d.color {
		line = ansiDim + line + ansiReset
	}
	d.raw(line + "\n")
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
