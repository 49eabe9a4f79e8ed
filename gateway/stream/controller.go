package stream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pibot/pibot/chat"
)

// ErrFinished is returned by a second Finish or Abort.
var ErrFinished = errors.New("stream: reply already finished")

// Controller streams one reply into one conversation. It owns the reply's
// content, which its callers change; its publisher shows it from the
// loop's goroutine at the platform's pace, and a surface (edit, native or
// append-only) owns the platform calls. Its methods are safe for
// concurrent use.
type Controller struct {
	opts Options
	now  func() time.Time
	loop *loop
	r    reply
	out  publisher

	// pub is held while a surface or the typing line makes platform
	// calls: by the publishing loop's every step, by Cut and by the final
	// delivery.
	pub sync.Mutex
}

// reply is the content of a reply and its state, which mu guards: the
// Controller changes them, its publisher reads them to show the reply.
type reply struct {
	mu       sync.Mutex
	doc      document
	version  uint64    // bumped on every content change
	firstAt  time.Time // first content
	started  bool
	finished bool
}

// New returns a Controller for one reply in conv.
func New(ad chat.Adapter, conv chat.ConvRef, opts Options) *Controller {
	if opts.Verbosity == "" {
		opts.Verbosity = Tools
	}
	if opts.FinalWait <= 0 {
		opts.FinalWait = defaultWait
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("conv", conv.Key())
	caps := ad.Caps(conv)
	plat := gated(ad, &gate{allowed: opts.Allowed})
	c := &Controller{
		opts: opts,
		now:  opts.Now,
		loop: newLoop(),
	}
	p := &c.out
	*p = publisher{
		r:         &c.r,
		verbosity: opts.Verbosity,
		now:       opts.Now,
		pace:      newPacer(log, opts.Now, caps.EditInterval),
		msgs:      &messages{onAdd: opts.OnPost},
	}
	p.surf = newSurface(outlet{
		platform: plat, conv: conv, replyTo: opts.ReplyTo, recipient: opts.Recipient, team: opts.RecipientTeam, log: log,
		pace: p.pace, msgs: p.msgs, loop: c.loop,
		chunks: newChunker(caps, opts.Splitters),
	}, caps, opts.Continue)
	_, appendOnly := p.surf.(*appendSurface)
	p.typing = indicator{typer: plat.typer, conv: conv, refresh: caps.TypingRefresh, pace: p.pace, log: log,
		prompt: appendOnly || caps.StatusLine, always: caps.StatusLine}
	return c
}

// Start starts the goroutine that shows the reply while it grows. It stops
// at Finish, Abort or the end of ctx; adapter calls made while streaming use
// ctx. Start after Finish or a second Start does nothing.
func (c *Controller) Start(ctx context.Context) {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if c.r.started || c.r.finished {
		return
	}
	c.r.started = true
	go c.loop.run(ctx, c.now, func(ctx context.Context) time.Duration {
		c.pub.Lock()
		defer c.pub.Unlock()
		return c.out.step(ctx)
	})
}

// SetText replaces the markdown of the current assistant message.
func (c *Controller) SetText(markdown string) {
	c.change(func(d *document) bool {
		d.setText(markdown)
		return markdown != ""
	}, true)
}

// EndMessage closes the current assistant message; the next SetText starts
// a new section after it.
func (c *Controller) EndMessage() {
	c.change(func(d *document) bool {
		d.endMessage()
		return false
	}, false)
}

// SetThinking replaces the thinking text of the current assistant message;
// it is shown only in Verbose.
func (c *Controller) SetThinking(text string) {
	c.change(func(d *document) bool {
		d.setThinking(text)
		return text != "" && c.opts.Verbosity == Verbose
	}, false)
}

// ToolStart records that a tool call began; args are its JSON arguments,
// from which the tool's line shows the command, path or pattern.
func (c *Controller) ToolStart(id, name string, args json.RawMessage) {
	now, summary := c.now(), toolSummary(args, c.opts.Verbosity)
	c.change(func(d *document) bool {
		d.toolStart(id, name, summary, now)
		return true
	}, false)
}

// ToolResumed restarts the clock of the running tool call id: it runs
// from now. A call that waited for an approval shows how long it ran, not
// how long the approval took.
func (c *Controller) ToolResumed(id string) {
	now := c.now()
	c.change(func(d *document) bool {
		t, ok := d.tools[id]
		if !ok || t.done {
			return false
		}
		t.start = now
		return true
	}, false)
}

// ToolEnd records that the tool call id ended with output, the text of
// its result (whole, or a head of it). Verbose shows its first lines; Tools
// shows its start after a failed tool's line.
func (c *Controller) ToolEnd(id string, isError bool, output string) {
	now, detail := c.now(), toolDetail(output, isError, c.opts.Verbosity)
	c.change(func(d *document) bool {
		return d.toolEnd(id, isError, detail, now)
	}, false)
}

// Status sets the transient status line ("retrying (1/3) in 2s",
// "compacting…"); "" clears it. It is not part of the final reply.
func (c *Controller) Status(s string) {
	c.change(func(d *document) bool {
		d.status = s
		return s != ""
	}, false)
}

// change applies f to the document, unless the reply is finished, and
// wakes the loop. f reports whether it added visible content; textOnly
// tells that f changes only the text of the open message, which matters
// to the loop only once it can be shown.
func (c *Controller) change(f func(*document) bool, textOnly bool) {
	c.r.mu.Lock()
	if c.r.finished {
		c.r.mu.Unlock()
		return
	}
	if f(&c.r.doc) && c.r.firstAt.IsZero() {
		c.r.firstAt = c.now()
	}
	c.r.version++
	// While the reply shows itself, most changes come between two edits:
	// the loop's timer fires at the next edit anyway. (On an append-only
	// surface the status line shows progress: every change may matter.)
	// The loop set its timer a moment after the pacer noted the last
	// edit, so the two instants differ by that moment (wakeSlack).
	wakeAt, sleeping := c.loop.sleepsUntil()
	skip := sleeping && c.out.surf.showsProgress() && !wakeAt.After(c.out.pace.nextOut().Add(wakeSlack))
	// Before the first post the loop sleeps until the post is due by
	// time (firstPostDelay); the first tokens, too short to post it
	// earlier (firstPostChars), need not wake it one by one.
	if !skip && textOnly && sleeping && c.out.waitsFirst && !c.out.msgs.shown() {
		now := c.now()
		skip = now.Before(c.r.firstAt.Add(firstPostDelay)) &&
			utf8.RuneCountInString(c.out.surf.view(&c.r.doc, c.opts.Verbosity, now)) < firstPostChars
	}
	c.r.mu.Unlock()
	if !skip {
		c.loop.poke()
	}
}

// Refs returns the messages of the reply posted so far, in order.
func (c *Controller) Refs() []chat.MsgRef { return c.out.msgs.list() }
