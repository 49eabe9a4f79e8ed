package term

import (
	"bufio"
	"fmt"
	"io"
	"unicode"
)

// prompt is shown before the line being typed (Config.Edit).
const prompt = "› "

// maxHistory is how many lines the history keeps.
const maxHistory = 500

// editor is the state of the line being typed on a raw-mode terminal. It
// is guarded by the display's mu, so output and typing never interleave:
// every message is printed above the prompt, which is drawn again after.
type editor struct {
	active  bool // the prompt is on screen
	buf     []rune
	pos     int // cursor, an index into buf
	history []string
	hpos    int    // index into history while walking it; len(history) is the line being typed
	draft   []rune // the line being typed, kept while walking the history
}

// hidePrompt takes the prompt line off the screen while the caller prints
// and returns the function that draws it again. d.mu is held by both.
func (d *display) hidePrompt() func() {
	if d.line.active {
		d.raw(ansiClearLine)
	}
	d.hideStatus()
	if !d.line.active {
		return func() {}
	}
	return d.drawPrompt
}

// hideStatus takes the transient status line of a live terminal off the
// screen; the cursor is at the start of the line below it. d.mu is held.
func (d *display) hideStatus() {
	d.toast = false
	if d.statusRows == 0 {
		return
	}
	d.raw(fmt.Sprintf("\x1b[%dA\r%s", d.statusRows, ansiClearScreen))
	d.statusRows = 0
}

// drawPrompt draws the prompt and the line being typed, with the cursor in
// place. d.mu is held.
func (d *display) drawPrompt() {
	if !d.line.active {
		return
	}
	line := ansiClearLine + prompt + string(d.line.buf)
	if back := displayWidth(string(d.line.buf[d.line.pos:])); back > 0 {
		line += fmt.Sprintf("\x1b[%dD", back)
	}
	d.raw(line)
}

// raw writes text; a write error is logged (the terminal is gone, and the
// caller can do nothing about it). d.mu is held.
func (d *display) raw(text string) {
	if _, err := io.WriteString(d.out, text); err != nil {
		d.log.Warn("term: write", "err", err)
	}
}

// Keys of the line editor.
const (
	keyCtrlA     = 0x01
	keyCtrlB     = 0x02
	keyCtrlD     = 0x04
	keyCtrlE     = 0x05
	keyCtrlF     = 0x06
	keyBackspace = 0x08
	keyCtrlK     = 0x0b
	keyEnter     = 0x0d
	keyCtrlN     = 0x0e
	keyCtrlP     = 0x10
	keyCtrlU     = 0x15
	keyCtrlW     = 0x17
	keyEscape    = 0x1b
	keyDelete    = 0x7f
)

// readEdited reads keys from a raw-mode terminal and sends each finished
// line to lines, until the input ends, Ctrl-D on an empty line or quit.
func (a *Adapter) readEdited(lines chan<- string, quit <-chan struct{}) error {
	r := bufio.NewReader(a.in)
	a.disp.mu.Lock()
	a.disp.line.active = true
	a.disp.line.hpos = len(a.disp.line.history)
	a.disp.drawPrompt()
	a.disp.mu.Unlock()
	defer func() {
		a.disp.mu.Lock()
		a.disp.raw(ansiClearLine)
		a.disp.line.active = false
		a.disp.mu.Unlock()
	}()
	for {
		k, err := readKey(r)
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		a.disp.mu.Lock()
		line, done, eof := a.disp.line.key(k)
		if done {
			a.disp.sent(line)
		}
		a.disp.drawPrompt()
		a.disp.mu.Unlock()
		if eof {
			return nil
		}
		if done {
			select {
			case lines <- line:
			case <-quit:
				return nil
			}
		}
	}
}

// sent leaves the line the user sent on screen as their message, above
// the replies still streaming on a live terminal, which go on being
// redrawn in place below it. d.mu is held.
func (d *display) sent(line string) {
	d.raw(ansiClearLine)
	d.hideStatus()
	if d.live {
		d.tail.add(block{text: prompt + line})
		return
	}
	d.raw(prompt + line + "\n")
}

// key is one key press: a rune, or a named key.
type key struct {
	r    rune
	name string // "up", "down", "left", "right", "home", "end", "delete"; "" for a rune
}

// readKey reads one key, decoding the escape sequences of the cursor keys.
func readKey(r *bufio.Reader) (key, error) {
	c, _, err := r.ReadRune()
	if err != nil {
		return key{}, err
	}
	if c != keyEscape {
		return key{r: c}, nil
	}
	b, err := r.ReadByte()
	if err != nil {
		return key{r: c}, nil
	}
	if b != '[' && b != 'O' {
		return key{}, nil // Alt+key: ignored
	}
	var param []byte
	for {
		f, err := r.ReadByte()
		if err != nil {
			return key{}, nil
		}
		if f >= 0x40 && f <= 0x7e {
			return key{name: csiName(f, string(param))}, nil
		}
		param = append(param, f)
	}
}

// csiName names the key of a CSI or SS3 sequence with final byte f.
func csiName(f byte, param string) string {
	switch f {
	case 'A':
		return "up"
	case 'B':
		return "down"
	case 'C':
		return "right"
	case 'D':
		return "left"
	case 'H':
		return "home"
	case 'F':
		return "end"
	case '~':
		switch param {
		case "1", "7":
			return "home"
		case "4", "8":
			return "end"
		case "3":
			return "delete"
		}
	}
	return ""
}

// key applies one key press. done reports a finished line (Enter); eof
// that the user ended the input (Ctrl-D on an empty line).
func (e *editor) key(k key) (line string, done, eof bool) {
	switch k.name {
	case "left":
		e.pos = max(0, e.pos-1)
	case "right":
		e.pos = min(len(e.buf), e.pos+1)
	case "home":
		e.pos = 0
	case "end":
		e.pos = len(e.buf)
	case "up":
		e.walk(-1)
	case "down":
		e.walk(+1)
	case "delete":
		e.deleteAt(e.pos)
	case "":
		return e.control(k.r)
	}
	return "", false, false
}

// control applies a rune key: a control key or a typed character.
func (e *editor) control(r rune) (line string, done, eof bool) {
	switch r {
	case keyEnter, '\n':
		line = string(e.buf)
		if line != "" && (len(e.history) == 0 || e.history[len(e.history)-1] != line) {
			e.history = append(e.history, line)
			if len(e.history) > maxHistory {
				e.history = e.history[1:]
			}
		}
		e.buf, e.pos, e.draft = nil, 0, nil
		e.hpos = len(e.history)
		return line, true, false
	case keyCtrlD:
		if len(e.buf) == 0 {
			return "", false, true
		}
		e.deleteAt(e.pos)
	case keyDelete, keyBackspace:
		if e.pos > 0 {
			e.pos--
			e.deleteAt(e.pos)
		}
	case keyCtrlA:
		e.pos = 0
	case keyCtrlE:
		e.pos = len(e.buf)
	case keyCtrlB:
		e.pos = max(0, e.pos-1)
	case keyCtrlF:
		e.pos = min(len(e.buf), e.pos+1)
	case keyCtrlP:
		e.walk(-1)
	case keyCtrlN:
		e.walk(+1)
	case keyCtrlK:
		e.buf = e.buf[:e.pos]
	case keyCtrlU:
		e.buf = append([]rune(nil), e.buf[e.pos:]...)
		e.pos = 0
	case keyCtrlW:
		i := e.pos
		for i > 0 && unicode.IsSpace(e.buf[i-1]) {
			i--
		}
		for i > 0 && !unicode.IsSpace(e.buf[i-1]) {
			i--
		}
		e.buf = append(e.buf[:i], e.buf[e.pos:]...)
		e.pos = i
	default:
		if r == '\t' || unicode.IsPrint(r) {
			e.buf = append(e.buf[:e.pos], append([]rune{r}, e.buf[e.pos:]...)...)
			e.pos++
		}
	}
	return "", false, false
}

// deleteAt removes the rune at i, if any.
func (e *editor) deleteAt(i int) {
	if i < len(e.buf) {
		e.buf = append(e.buf[:i], e.buf[i+1:]...)
	}
}

// walk moves through the history by d (-1 older, +1 newer), keeping the
// line being typed as the newest entry.
func (e *editor) walk(d int) {
	n := e.hpos + d
	if n < 0 || n > len(e.history) {
		return
	}
	if e.hpos == len(e.history) {
		e.draft = append([]rune(nil), e.buf...)
	}
	e.hpos = n
	if n == len(e.history) {
		e.buf = append([]rune(nil), e.draft...)
	} else {
		e.buf = []rune(e.history[n])
	}
	e.pos = len(e.buf)
}
