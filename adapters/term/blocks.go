package term

import (
	"fmt"
	"slices"
	"strings"
)

// block is one piece of what a live terminal shows: a message with its
// numbered buttons, a note of the adapter's own, or a line the user sent.
// The display keeps the blocks at the end of the output, down to the
// cursor, and changes any of them by redrawing from its first changed line
// to the end, so a message edited while others follow it (an approval
// card answered while the reply goes on below it) is not printed again.
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
func (d *display) find(id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(d.blocks, func(b block) bool { return b.id == id })
}

// insertAt is where a new block that is not a streaming reply goes: above
// the replies streaming at the end of the output.
func (d *display) insertAt() int {
	i := len(d.blocks)
	for i > 0 && d.blocks[i-1].open {
		i--
	}
	return i
}

// redrawTo changes the screen from d.blocks to next: the cursor moves up
// to the first line that differs, clears the screen below and prints the
// rest. It reports false, having printed nothing, when that line is out of
// the cursor's reach (scrolled off the top). The prompt and the status
// line are off the screen. d.mu is held.
func (d *display) redrawTo(next []block) bool {
	old, text := blocksText(d.blocks), blocksText(next)
	p := commonPrefix(old, text)
	start := strings.LastIndexByte(old[:p], '\n') + 1
	cols, height := d.termSize()
	up := linesRows(old[start:], cols)
	if up >= height {
		return false
	}
	if up > 0 {
		d.raw(fmt.Sprintf("\r\x1b[%dA%s", up, ansiClearScreen))
	}
	d.raw(text[start:])
	d.blocks = next
	d.trim(cols, height)
	return true
}

// trim forgets the blocks no line of which the cursor can reach any more.
func (d *display) trim(cols, height int) {
	rows := 0
	for i := len(d.blocks) - 1; i > 0; i-- {
		rows += linesRows(d.blocks[i].text+"\n", cols)
		if rows >= height {
			d.blocks = slices.Delete(d.blocks, 0, i)
			return
		}
	}
}

// add shows a new block: a streaming reply at the end of the output,
// anything else above the replies streaming there (which are redrawn
// below it), or at the end when they are too tall to redraw. d.mu is held.
func (d *display) add(b block) {
	if at := d.insertAt(); !b.open && at < len(d.blocks) {
		if d.redrawTo(slices.Insert(slices.Clone(d.blocks), at, b)) {
			return
		}
	}
	d.redrawTo(append(slices.Clone(d.blocks), b)) // nothing above the cursor changes
}

// replace shows the block at i with text, in place. When the lines that
// change are out of reach the old text stays where it is, no longer that
// message's, and the new text is added as a new block. d.mu is held.
func (d *display) replace(i int, text string, open bool) {
	next := slices.Clone(d.blocks)
	next[i].text, next[i].open = text, open
	if d.redrawTo(next) {
		return
	}
	id := d.blocks[i].id
	d.blocks[i].id, d.blocks[i].open = "", false
	d.add(block{id: id, text: text, open: open})
}

// remove takes the block at i off the screen; out of reach, it stays,
// no longer that message's. d.mu is held.
func (d *display) remove(i int) {
	if d.redrawTo(slices.Delete(slices.Clone(d.blocks), i, i+1)) {
		return
	}
	d.blocks[i].id, d.blocks[i].open = "", false
}
