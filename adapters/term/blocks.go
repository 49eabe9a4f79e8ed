package term

import (
	"fmt"
	"slices"
	"strings"
)

// tail is the end of a live terminal's output, down to the cursor, as
// blocks. Any block changes by redrawing from its first changed line to
// the end, so a message edited while others follow it (an approval card
// answered while the reply goes on below it) is not printed again. Its
// methods are called with the display's mu held and the prompt and the
// status line off the screen.
type tail struct {
	blocks []block
	// write prints to the terminal.
	write func(string)
	// size returns the terminal's columns and rows.
	size func() (cols, rows int)
}

// block is one piece of what a live terminal shows: a message with its
// numbered buttons, a note of the adapter's own, or a line the user sent.
type block struct {
	// id is the message's id; "" for a block that never changes.
	id string
	// text is what is printed, without the newline that follows it.
	text string
	// open marks a reply still streaming: it stays at the end of the
	// output, and what is printed meanwhile goes above it.
	open bool
}

// blocksText is blocks as printed, each followed by a newline.
func blocksText(bs []block) string {
	var b strings.Builder
	for _, bl := range bs {
		b.WriteString(bl.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// linesRows is how many terminal rows s, whole lines each ending with a
// newline, takes on a terminal cols wide.
func linesRows(s string, cols int) int {
	s, ok := strings.CutSuffix(s, "\n")
	if !ok && s == "" {
		return 0
	}
	return screenRows(s, cols)
}

// find returns the index of the block of message id, or -1.
func (t *tail) find(id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(t.blocks, func(b block) bool { return b.id == id })
}

// insertAt is where a new block that is not a streaming reply goes: above
// the replies streaming at the end of the output.
func (t *tail) insertAt() int {
	i := len(t.blocks)
	for i > 0 && t.blocks[i-1].open {
		i--
	}
	return i
}

// redrawTo changes the screen from t.blocks to next: the cursor moves up
// to the first line that differs, clears the screen below and prints the
// rest. It reports false, having printed nothing, when that line is out of
// the cursor's reach (scrolled off the top).
func (t *tail) redrawTo(next []block) bool {
	old, text := blocksText(t.blocks), blocksText(next)
	p := commonPrefix(old, text)
	start := strings.LastIndexByte(old[:p], '\n') + 1
	cols, height := t.size()
	up := linesRows(old[start:], cols)
	if up >= height {
		return false
	}
	if up > 0 {
		t.write(fmt.Sprintf("\r\x1b[%dA%s", up, ansiClearScreen))
	}
	t.write(text[start:])
	t.blocks = next
	t.trim(cols, height)
	return true
}

// trim forgets the blocks no line of which the cursor can reach any more.
func (t *tail) trim(cols, height int) {
	rows := 0
	for i := len(t.blocks) - 1; i > 0; i-- {
		rows += linesRows(t.blocks[i].text+"\n", cols)
		if rows >= height {
			t.blocks = slices.Delete(t.blocks, 0, i)
			return
		}
	}
}

// add shows a new block: a streaming reply at the end of the output,
// anything else above the replies streaming there (which are redrawn
// below it), or at the end when they are too tall to redraw.
func (t *tail) add(b block) {
	if at := t.insertAt(); !b.open && at < len(t.blocks) {
		if t.redrawTo(slices.Insert(slices.Clone(t.blocks), at, b)) {
			return
		}
	}
	t.redrawTo(append(slices.Clone(t.blocks), b)) // nothing above the cursor changes
}

// replace shows the block at i with text, in place. When the lines that
// change are out of reach the old text stays where it is, no longer that
// message's, and the new text is added as a new block.
func (t *tail) replace(i int, text string, open bool) {
	next := slices.Clone(t.blocks)
	next[i].text, next[i].open = text, open
	if t.redrawTo(next) {
		return
	}
	id := t.blocks[i].id
	t.blocks[i].id, t.blocks[i].open = "", false
	t.add(block{id: id, text: text, open: open})
}

// remove takes the block at i off the screen; out of reach, it stays,
// no longer that message's.
func (t *tail) remove(i int) {
	if t.redrawTo(slices.Delete(slices.Clone(t.blocks), i, i+1)) {
		return
	}
	t.blocks[i].id, t.blocks[i].open = "", false
}
