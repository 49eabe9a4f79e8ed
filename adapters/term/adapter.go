// Package term is pibot's terminal chat adapter (`pibot chat`): it reads
// the user's lines from an io.Reader and writes the bot's messages, rendered
// with ANSI styles (or as plain text), to an io.Writer.
//
// Every message ends with a newline. On a terminal (Config.Live) a reply
// being streamed, or an edited message, is redrawn in place from its first
// changed line, with everything below it; a reply being streamed stays at
// the end of the output, and what is printed meanwhile (the user's lines,
// answers to commands) goes above it. Elsewhere (a pipe, a file) a streamed
// reply prints only its final text, and an edit prints only the message's
// new text. With Config.Edit the adapter reads
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
	"sync/atomic"
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
	// movement: streamed replies and edited messages are redrawn in
	// place. Without it a streamed reply prints only its final text.
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
//
// The Adapter reads the input (Run) and turns the chat calls into changes
// of the display, which holds what the terminal shows.
type Adapter struct {
	in      io.Reader
	edit    bool
	dialect chat.Dialect
	ids     ids
	disp    *display
}

// ids hands out process-unique message ids.
type ids struct {
	// epoch distinguishes this process's ids from those of an earlier
	// run.
	epoch string
	seq   atomic.Uint64
}

// next returns a new id starting with prefix.
func (i *ids) next(prefix string) string {
	return prefix + i.epoch + "-" + strconv.FormatUint(i.seq.Add(1), 10)
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
	dialect := chat.DialectPlain
	if cfg.Color {
		dialect = chat.DialectANSI
	}
	d := &display{
		out:   cfg.Out,
		color: cfg.Color,
		live:  cfg.Live,
		size:  cfg.Size,
		log:   log,
		msgs:  make(map[string]*shown),
	}
	d.tail = tail{write: d.raw, size: d.termSize}
	return &Adapter{
		in:      cfg.In,
		edit:    cfg.Edit,
		dialect: dialect,
		ids:     ids{epoch: strconv.FormatInt(time.Now().UnixNano(), 36)},
		disp:    d,
	}, nil
}

// Platform returns "term".
func (a *Adapter) Platform() chat.Platform { return Platform }

// Caps returns the terminal's capabilities.
func (a *Adapter) Caps(chat.ConvRef) chat.Caps {
	c := chat.Caps{Dialect: a.dialect, MaxLen: MaxLen, EditInterval: EditInterval, NativeStream: true}
	if a.disp.live {
		// A live terminal shows a transient status line ("thinking…",
		// "running bash…") until the reply shows.
		c.TypingRefresh = statusRefresh
	}
	return c
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
	text := strings.TrimRight(chat.Render(m.Markdown, a.dialect), "\n")
	ref := chat.MsgRef{Conv: conv, ID: a.ids.next("b")}
	a.disp.mu.Lock()
	defer a.disp.mu.Unlock()
	defer a.disp.hidePrompt()()
	a.disp.put(ref, shown{markdown: m.Markdown, text: text, buttons: m.Buttons}, false)
	return ref, nil
}

// Edit updates a bot message: on a live terminal it is redrawn in place,
// with what follows it; otherwise its new text (or new buttons) is printed.
// An unknown message gives an error wrapping chat.ErrNotFound.
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	if err := checkButtons(m.Buttons); err != nil {
		return fmt.Errorf("term: edit: %w", err)
	}
	text := strings.TrimRight(chat.Render(m.Markdown, a.dialect), "\n")
	a.disp.mu.Lock()
	defer a.disp.mu.Unlock()
	s := a.disp.msgs[ref.ID]
	if s == nil || checkConv(ref.Conv) != nil {
		return fmt.Errorf("term: edit %s: %w", ref.Key(), chat.ErrNotFound)
	}
	if s.text == text && equalButtons(s.buttons, m.Buttons) {
		return nil
	}
	defer a.disp.hidePrompt()()
	a.disp.put(ref, shown{markdown: m.Markdown, text: text, buttons: m.Buttons}, false)
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
	d := a.disp
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live {
		switch {
		case d.toast && status == "":
			return nil // a toast stays until the next output
		case !d.toast && status == d.status && (status == "") == (d.statusRows == 0):
			return nil // already shown (or already gone)
		}
		defer d.hidePrompt()() // takes the old status line away too
		if status != "" {
			d.transient("… " + status)
		}
		d.status = status
		return nil
	}
	if status != "" && status != d.status {
		defer d.hidePrompt()()
		d.note("… " + status)
	}
	d.status = status
	return nil
}

// Answer applies Replace to the message that carried the pressed button
// (only its buttons when Replace.Markdown is empty), shows the toast and
// sends Reply as a normal message (the terminal has one user, so an
// ephemeral message is just a message). On a live terminal the toast is
// transient, like the status line: the message it answers shows the
// outcome. Terminal interactions never expire.
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	if ix.Platform != Platform {
		return chat.MsgRef{}, fmt.Errorf("term: answer: not a terminal interaction")
	}
	if r.Replace != nil {
		out := *r.Replace
		if out.Markdown == "" {
			a.disp.mu.Lock()
			s := a.disp.msgs[ix.Msg.ID]
			a.disp.mu.Unlock()
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
		d := a.disp
		d.mu.Lock()
		show := d.hidePrompt()
		if d.live {
			d.transient("✓ " + r.Toast)
			d.toast = true
		} else {
			d.note("✓ " + r.Toast)
		}
		show()
		d.mu.Unlock()
	}
	if r.Reply == nil {
		return chat.MsgRef{}, nil
	}
	return a.Send(ctx, ix.Conv, *r.Reply)
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
