package stream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// ErrFinished is returned by a second Finish or Abort.
var ErrFinished = errors.New("stream: reply already finished")

// Controller streams one reply into one conversation. Its methods are safe
// for concurrent use.
type Controller struct {
	ad       chat.Adapter
	conv     chat.ConvRef
	caps     chat.Caps
	opts     Options
	log      *slog.Logger
	now      func() time.Time
	typer    chat.Typer
	streamer chat.Streamer
	deleter  chat.Deleter
	limit    int            // chunk size for chat.Split; 0: no splitting
	splitter *chat.Splitter // taken at the first split

	wake chan struct{} // content changed; capacity 1
	stop chan struct{} // closed by Finish/Abort
	done chan struct{} // closed when the loop goroutine returns

	mu       sync.Mutex
	doc      document
	version  uint64    // bumped on every content change
	firstAt  time.Time // first content
	started  bool
	finished bool
	out      output
	// sleeping: the loop waits on its timer until wakeAt (set by the
	// loop only). A change need not wake it when no edit can be due
	// before then.
	sleeping bool
	wakeAt   time.Time
}

// slot is a posted message showing chunk i of the reply.
type slot struct {
	ref   chat.MsgRef
	last  string // markdown last shown
	fails int    // consecutive failed edits
}

// output is the delivery state; it is changed by one goroutine at a time
// (the loop, then Finish or Abort) under Controller.mu.
type output struct {
	slots       []*slot       // live messages; slots[i] shows chunk i
	refs        []chat.MsgRef // every message of the reply, in order
	native      chat.Stream   // open native stream
	nativeLast  string
	nativeOff   bool // do not (or no longer) stream natively
	interval    time.Duration
	pausedUntil time.Time
	strikes     int
	finalOnly   bool
	abandons    int
	sendFails   int
	lastOut     time.Time
	lastTyping  time.Time
	typed       bool
	visible     bool
	sentVersion uint64
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
	c := &Controller{
		ad:   ad,
		conv: conv,
		caps: ad.Caps(conv),
		opts: opts,
		log:  log.With("conv", conv.Key()),
		now:  opts.Now,
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	c.typer, _ = ad.(chat.Typer)
	c.deleter, _ = ad.(chat.Deleter)
	if s, ok := ad.(chat.Streamer); ok && c.caps.NativeStream {
		c.streamer = s
	}
	c.out.nativeOff = c.streamer == nil
	c.out.interval = c.caps.EditInterval
	if c.out.interval <= 0 {
		c.out.interval = defaultInterval
	}
	if c.caps.MaxLen > 0 {
		c.limit = max(1, c.caps.MaxLen*splitPercent/100)
	}
	return c
}

// Start starts the goroutine that shows the reply while it grows. It stops
// at Finish, Abort or the end of ctx; adapter calls made while streaming use
// ctx. Start after Finish or a second Start does nothing.
func (c *Controller) Start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.finished {
		return
	}
	c.started = true
	go c.run(ctx)
}

// SetText replaces the markdown of the current assistant message.
func (c *Controller) SetText(markdown string) {
	c.change(func(d *document) bool {
		d.setText(markdown)
		return markdown != ""
	})
}

// EndMessage closes the current assistant message; the next SetText starts
// a new section after it.
func (c *Controller) EndMessage() {
	c.change(func(d *document) bool {
		d.endMessage()
		return false
	})
}

// SetThinking replaces the thinking text of the current assistant message;
// it is shown only in Verbose.
func (c *Controller) SetThinking(text string) {
	c.change(func(d *document) bool {
		d.setThinking(text)
		return text != "" && c.opts.Verbosity == Verbose
	})
}

// ToolStart records that a tool call began; summary is its compact
// argument line (a command, a path).
func (c *Controller) ToolStart(id, name, summary string) {
	now := c.now()
	c.change(func(d *document) bool {
		d.toolStart(id, name, summary, now)
		return true
	})
}

// ToolEnd records that the tool call id ended. excerpt is the head of its
// result, shown in Verbose (and its first line on error in Tools).
func (c *Controller) ToolEnd(id string, isError bool, excerpt string) {
	now := c.now()
	c.change(func(d *document) bool {
		return d.toolEnd(id, isError, excerpt, now)
	})
}

// Status sets the transient status line ("retrying (1/3) in 2s",
// "compacting…"); "" clears it. It is not part of the final reply.
func (c *Controller) Status(s string) {
	c.change(func(d *document) bool {
		d.status = s
		return s != ""
	})
}

// change applies f to the document, unless the reply is finished, and
// wakes the loop. f reports whether it added visible content.
func (c *Controller) change(f func(*document) bool) {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return
	}
	if f(&c.doc) && c.firstAt.IsZero() {
		c.firstAt = c.now()
	}
	c.version++
	// While the reply streams, most changes come between two edits:
	// the loop's timer fires at the next edit anyway.
	skip := c.sleeping && c.out.visible && !c.wakeAt.After(c.nextEditLocked())
	c.mu.Unlock()
	if skip {
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// nextEditLocked is the earliest time the reply can be edited again.
func (c *Controller) nextEditLocked() time.Time {
	t := c.out.lastOut.Add(c.out.interval)
	if c.out.pausedUntil.After(t) {
		t = c.out.pausedUntil
	}
	return t
}

// Posted returns how many messages of the reply are posted so far.
func (c *Controller) Posted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out.refs)
}

// Refs returns the messages of the reply posted so far, in order.
func (c *Controller) Refs() []chat.MsgRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.out.refs)
}

// Finish stops streaming and delivers the complete reply: final.Markdown,
// if not empty, replaces the text of the last assistant message (open or
// just ended; tool lines and earlier messages stay), or follows the last
// tool line; final.Buttons go on the last message.
// It returns every message of the reply, in order. An error means part of
// the reply could not be delivered within ctx and Options.FinalWait.
func (c *Controller) Finish(ctx context.Context, final chat.Out) ([]chat.MsgRef, error) {
	if !c.end() {
		return c.Refs(), ErrFinished
	}
	c.mu.Lock()
	if final.Markdown != "" {
		c.doc.setFinal(final.Markdown)
	}
	c.doc.endMessage()
	md := c.doc.render(c.opts.Verbosity, c.now(), false)
	c.mu.Unlock()
	err := c.deliver(ctx, md, final.Buttons, final.Silent)
	c.clearStatus(ctx)
	return c.Refs(), err
}

// Abort stops streaming and marks the reply interrupted: what was said so
// far stays, followed by note (for example "⏹ stopped").
func (c *Controller) Abort(ctx context.Context, note string) ([]chat.MsgRef, error) {
	if !c.end() {
		return c.Refs(), ErrFinished
	}
	c.mu.Lock()
	c.doc.endMessage()
	md := c.doc.render(c.opts.Verbosity, c.now(), false)
	c.mu.Unlock()
	if note != "" {
		if md != "" {
			md += "\n\n"
		}
		md += note
	}
	err := c.deliver(ctx, md, nil, false)
	c.clearStatus(ctx)
	return c.Refs(), err
}

// end marks the reply finished and waits for the loop to return. It
// reports false if the reply was already finished.
func (c *Controller) end() bool {
	c.mu.Lock()
	if c.finished {
		c.mu.Unlock()
		return false
	}
	c.finished = true
	started := c.started
	c.mu.Unlock()
	if started {
		close(c.stop)
		<-c.done
	}
	return true
}

// run is the loop goroutine.
func (c *Controller) run(ctx context.Context) {
	defer close(c.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.stop:
			return
		case <-c.wake:
		case <-t.C:
		}
		c.mu.Lock()
		c.sleeping = false
		c.mu.Unlock()
		d := c.step(ctx)
		c.mu.Lock()
		if d >= 0 {
			c.sleeping, c.wakeAt = true, c.now().Add(d)
			t.Reset(d)
		} else {
			t.Stop()
		}
		c.mu.Unlock()
	}
}

// stopping reports whether Finish or Abort is waiting for the loop.
func (c *Controller) stopping() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}
