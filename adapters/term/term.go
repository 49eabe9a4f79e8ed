// Package term is pibot's terminal chat adapter (`pibot chat`): it reads
// the user's lines from an io.Reader and writes the bot's messages, rendered
// with ANSI styles (or as plain text), to an io.Writer.
//
// Every message ends with a newline. On a terminal (Config.Live) a reply
// being streamed, or an edit of the message that ends the output, is
// redrawn in place from its first changed line; elsewhere (a pipe, a file)
// a streamed reply prints only its final text, and an edit prints the whole
// message again after a "↻ edited" note. With Config.Edit the adapter reads
// a raw-mode terminal itself and gives the user line editing and history
// (edit.go).
// A line starting with "/" is a command; a line ending with "\" continues on
// the next line. When a message carries buttons they are printed numbered,
// "[1] Allow once  [2] Deny", and a line holding just a number presses one.
package term

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// Platform is the terminal chat's platform name.
const Platform chat.Platform = "term"

// UserID is the id of the terminal's one user; the display name is "you".
const UserID = "local"

// Channel is the terminal conversation's channel.
const Channel = "local"

// Limits of the terminal chat.
const (
	// MaxLen is the longest message, in characters.
	MaxLen = 1 << 16
	// EditInterval is the minimum time between edits of one message.
	EditInterval = 200 * time.Millisecond
	// maxMessages is how many messages stay editable.
	maxMessages = 256
)

// ANSI styles for the adapter's own annotations.
const (
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// Conv returns the terminal's conversation.
func Conv() chat.ConvRef { return chat.ConvRef{Platform: Platform, Channel: Channel, DM: true} }

// Config configures the terminal chat.
type Config struct {
	// In supplies the user's lines (stdin).
	In io.Reader
	// Out receives the conversation (stdout).
	Out io.Writer
	// Color enables ANSI styles.
	Color bool
	// Live means Out is a terminal that understands ANSI cursor
	// movement: streamed replies and edits of the last message are
	// redrawn in place. Without it a streamed reply prints only its
	// final text.
	Live bool
	// Size returns the terminal's columns and rows; nil or zero values
	// mean 80×24. Used with Live to know how many rows a message takes.
	Size func() (cols, rows int)
	// Edit means In is a terminal in raw mode (no echo, no line
	// buffering): the adapter echoes and edits the line itself, with a
	// prompt and a history walked with ↑ and ↓.
	Edit bool
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Adapter is the terminal chat. It implements chat.Adapter, chat.Typer
// and chat.Responder. Send, Edit, SetStatus and Answer work whether or not
// Run is active; Out.Ephemeral prints a normal message (the terminal has a
// single user).
type Adapter struct {
	in    io.Reader
	out   io.Writer
	color bool
	live  bool
	size  func() (int, int)
	edit  bool
	log   *slog.Logger
	epoch string

	mu     sync.Mutex
	seq    uint64
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

// New returns a terminal chat adapter.
func New(cfg Config) (*Adapter, error) {
	if cfg.In == nil || cfg.Out == nil {
		return nil, fmt.Errorf("term: new: In and Out are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Adapter{
		in:    cfg.In,
		out:   cfg.Out,
		color: cfg.Color,
		live:  cfg.Live,
		size:  cfg.Size,
		edit:  cfg.Edit,
		log:   log,
		epoch: strconv.FormatInt(time.Now().UnixNano(), 36),
		msgs:  make(map[string]*shown),
	}, nil
}

// Platform returns "term".
func (a *Adapter) Platform() chat.Platform { return Platform }

func (a *Adapter) dialect() chat.Dialect {
	if a.color {
		return chat.DialectANSI
	}
	return chat.DialectPlain
}

// Caps returns the terminal's capabilities.
func (a *Adapter) Caps(chat.ConvRef) chat.Caps {
	c := chat.Caps{Dialect: a.dialect(), MaxLen: MaxLen, EditInterval: EditInterval, NativeStream: true}
	if a.live {
		// A live terminal shows a transient status line ("thinking…",
		// "running bash…") until the reply shows.
		c.TypingRefresh = statusRefresh
	}
	return c
}

func (a *Adapter) newID(prefix string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	return prefix + a.epoch + "-" + strconv.FormatUint(a.seq, 10)
}

func checkConv(conv chat.ConvRef) error {
	if conv.Platform != Platform || conv.Channel != Channel {
		return fmt.Errorf("conversation %q is not the terminal", conv.Key())
	}
	return nil
}

// Send prints a bot message and returns its reference.
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	if err := checkConv(conv); err != nil {
		return chat.MsgRef{}, fmt.Errorf("term: send: %w", err)
	}
	if err := checkButtons(m.Buttons); err != nil {
		return chat.MsgRef{}, fmt.Errorf("term: send: %w", err)
	}
	text := strings.TrimRight(chat.Render(m.Markdown, a.dialect()), "\n")
	id := a.newID("b")
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.hidePrompt()()
	ref := chat.MsgRef{Conv: conv, ID: id}
	a.printLocked(ref, &shown{markdown: m.Markdown, text: text, buttons: m.Buttons})
	return ref, nil
}

// printLocked records and prints a new message. a.mu is held.
func (a *Adapter) printLocked(ref chat.MsgRef, s *shown) {
	a.msgs[ref.ID] = s
	a.order = append(a.order, ref.ID)
	if len(a.order) > maxMessages {
		delete(a.msgs, a.order[0])
		a.order = a.order[1:]
	}
	a.newLine()
	a.write(s.text + "\n")
	a.tail = ref.ID
	a.showButtons(ref, s.buttons)
}

// Edit updates a bot message: on a live terminal the message that ends
// the output is redrawn in place; otherwise the whole message is printed
// again. An unknown message gives an error wrapping chat.ErrNotFound.
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	if err := checkButtons(m.Buttons); err != nil {
		return fmt.Errorf("term: edit: %w", err)
	}
	text := strings.TrimRight(chat.Render(m.Markdown, a.dialect()), "\n")
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.msgs[ref.ID]
	if s == nil || checkConv(ref.Conv) != nil {
		return fmt.Errorf("term: edit %s: %w", ref.Key(), chat.ErrNotFound)
	}
	sameButtons := equalButtons(s.buttons, m.Buttons)
	if s.text == text && sameButtons {
		return nil
	}
	defer a.hidePrompt()()
	switch {
	case s.text == text:
	case a.live && a.tail == ref.ID && a.redraw(s.text, text):
	default:
		a.newLine()
		a.note("↻ edited")
		a.write(text + "\n")
		a.tail = ref.ID
	}
	s.text, s.markdown = text, m.Markdown
	if !sameButtons {
		s.buttons = m.Buttons
		if len(m.Buttons) > 0 {
			a.showButtons(ref, m.Buttons)
		} else if a.keyMsg.ID == ref.ID {
			a.keys = nil
		}
	}
	return nil
}

// SetStatus shows status. On a live terminal it is a transient line below
// the conversation, replaced by the next status and taken away by any
// other output or by ""; elsewhere a status line is printed when it
// changes, and "" prints nothing.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if err := checkConv(conv); err != nil {
		return fmt.Errorf("term: status: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.live {
		if status == a.status && (status == "") == (a.statusRows == 0) {
			return nil // already shown (or already gone)
		}
		defer a.hidePrompt()() // takes the old status line away too
		if status != "" {
			line := "… " + status
			cols, _ := a.termSize()
			a.statusRows = screenRows(line, cols)
			if a.color {
				line = ansiDim + line + ansiReset
			}
			a.raw(line + "\n")
		}
		a.status = status
		return nil
	}
	if status != "" && status != a.status {
		defer a.hidePrompt()()
		a.newLine()
		a.note("… " + status)
	}
	a.status = status
	return nil
}

// Answer applies Replace to the message that carried the pressed button
// (only its buttons when Replace.Markdown is empty), prints the toast and
// sends Reply as a normal message (the terminal has one user, so an
// ephemeral message is just a message). Terminal interactions never
// expire.
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	if ix.Platform != Platform {
		return chat.MsgRef{}, fmt.Errorf("term: answer: not a terminal interaction")
	}
	if r.Replace != nil {
		out := *r.Replace
		if out.Markdown == "" {
			a.mu.Lock()
			s := a.msgs[ix.Msg.ID]
			a.mu.Unlock()
			if s == nil {
				return chat.MsgRef{}, fmt.Errorf("term: answer: %s: %w", ix.Msg.Key(), chat.ErrNotFound)
			}
			out.Markdown = s.markdown
		}
		if err := a.Edit(ctx, ix.Msg, out); err != nil {
			return chat.MsgRef{}, fmt.Errorf("term: answer: %w", err)
		}
	}
	if r.Toast != "" {
		a.mu.Lock()
		show := a.hidePrompt()
		a.newLine()
		a.note("✓ " + r.Toast)
		show()
		a.mu.Unlock()
	}
	if r.Reply == nil {
		return chat.MsgRef{}, nil
	}
	return a.Send(ctx, ix.Conv, *r.Reply)
}

// showButtons prints numbered buttons and makes them the active ones.
// a.mu is held.
func (a *Adapter) showButtons(ref chat.MsgRef, rows [][]chat.Button) {
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
	a.newLine()
	a.write(strings.Join(labels, "  ") + "\n")
	a.tail = ""
	a.keys, a.keyMsg = keys, ref
}

// write prints s; a write error is logged (the terminal is gone, and the
// caller can do nothing about it). a.mu is held.
func (a *Adapter) write(s string) {
	if s == "" {
		return
	}
	if _, err := io.WriteString(a.out, s); err != nil {
		a.log.Warn("term: write", "err", err)
	}
	a.midLn = !strings.HasSuffix(s, "\n")
}

// newLine ends a partial line, and ends the streamed message. a.mu is held.
func (a *Adapter) newLine() {
	if a.midLn {
		a.write("\n")
	}
	a.tail = ""
}

// note prints one line of the adapter's own, dimmed when colored. a.mu is
// held.
func (a *Adapter) note(s string) {
	if a.color {
		s = ansiDim + s + ansiReset
	}
	a.write(s + "\n")
}

// checkButtons holds the terminal to the contract every platform keeps:
// button ids of 1 to chat.MaxButtonID bytes.
func checkButtons(rows [][]chat.Button) error {
	for _, row := range rows {
		for _, b := range row {
			if b.ID == "" || len(b.ID) > chat.MaxButtonID {
				return fmt.Errorf("button %q: id must be 1 to %d bytes", b.Label, chat.MaxButtonID)
			}
		}
	}
	return nil
}

func equalButtons(x, y [][]chat.Button) bool {
	return slices.EqualFunc(x, y, slices.Equal)
}
