package stream

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// surface is one way of showing a reply on a platform: editing messages
// (editSurface), a native stream (nativeSurface) or a stream that can only
// append (appendSurface). The controller owns the content and the timing;
// a surface owns the platform calls and what they have shown.
type surface interface {
	// view renders what the surface shows of d while the reply streams.
	// The controller's lock is held.
	view(d *document, v Verbosity, now time.Time) string
	// publish shows view, the latest live render, and reports whether all
	// of it is shown. Only the loop calls it.
	publish(ctx context.Context, view string) bool
	// deliver shows f.md as the complete reply. It is called once, after
	// the loop has stopped.
	deliver(ctx context.Context, f final) error
	// showsProgress reports whether the reply is on screen and shows its
	// own progress; until then, and while a tool runs, the typing line does.
	showsProgress() bool
	// cut shows f.md as the complete content of what the surface has
	// shown so far and makes the rest of the reply start in new messages
	// (Controller.Cut).
	cut(ctx context.Context, f final) error
}

// final is the complete reply as Finish or Abort deliver it.
type final struct {
	md       string
	buttons  [][]chat.Button
	silent   bool
	deadline time.Time // for retries and retry-after waits
}

// outlet is what every surface shares: where the reply goes, its pacing
// and its record of posted messages.
type outlet struct {
	platform  // every call behind the reply's gate
	conv      chat.ConvRef
	replyTo   *chat.MsgRef
	recipient string // the user a native stream is for
	team      string // the recipient's workspace ("" : the conversation's)
	pace      *pacer
	msgs      *messages
	chunks    *chunker
	loop      *loop
	log       *slog.Logger
}

// newSurface picks how the reply is shown: natively where the adapter
// streams (append-only or not), else by editing messages; by editing the
// messages of cont when the reply continues them.
func newSurface(o outlet, caps chat.Caps, cont []chat.MsgRef) surface {
	edit := &editSurface{outlet: o}
	if len(cont) > 0 {
		edit.resume(cont)
		return edit
	}
	if s := o.streamer; s != nil && caps.NativeStream {
		if caps.AppendOnly {
			return &appendSurface{outlet: o, streamer: s, edit: edit}
		}
		return &nativeSurface{outlet: o, streamer: s, edit: edit}
	}
	return edit
}

// open opens a native stream answering replyTo.
func (o *outlet) open(ctx context.Context, s chat.Streamer, replyTo *chat.MsgRef) (chat.Stream, error) {
	return s.OpenStream(ctx, o.conv, chat.StreamOptions{ReplyTo: replyTo, Recipient: o.recipient, RecipientTeam: o.team})
}

// firstReplyTo is the message the next post answers: Options.ReplyTo for
// the first message of the reply, nil after.
func (o *outlet) firstReplyTo() *chat.MsgRef {
	if o.msgs.count() == 0 {
		return o.replyTo
	}
	return nil
}

// messages records what a reply has put on screen: its messages, in order,
// and whether any of it shows yet. It is safe for concurrent use.
type messages struct {
	mu      sync.Mutex
	refs    []chat.MsgRef
	visible bool
	onAdd   func() // Options.OnPost
}

// add records a posted message and reports it to onAdd.
func (m *messages) add(ref chat.MsgRef) {
	m.mu.Lock()
	m.refs = append(m.refs, ref)
	m.visible = true
	m.mu.Unlock()
	if m.onAdd != nil {
		m.onAdd()
	}
}

// drop forgets a message that no longer exists.
func (m *messages) drop(ref chat.MsgRef) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.refs, ref); i >= 0 {
		m.refs = slices.Delete(m.refs, i, i+1)
	}
}

// show records that part of the reply shows without a message of its own
// (a native stream's draft).
func (m *messages) show() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.visible = true
}

func (m *messages) list() []chat.MsgRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.refs)
}

func (m *messages) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.refs)
}

func (m *messages) shown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.visible
}

// chunker cuts a reply into message-sized chunks with the splitter for the
// adapter's dialect. Only the publishing goroutine uses it.
type chunker struct {
	limit   int // 0: no splitting
	dialect chat.Dialect
	pool    *chat.Splitters // nil: a splitter of its own
	sp      *chat.Splitter  // taken at the first split
}

func newChunker(caps chat.Caps, pool *chat.Splitters) *chunker {
	k := &chunker{dialect: caps.Dialect, pool: pool}
	if caps.MaxLen > 0 {
		k.limit = max(1, caps.MaxLen*splitPercent/100)
	}
	return k
}

// split cuts md into chunks; nil for "".
func (k *chunker) split(md string) []string {
	if md == "" {
		return nil
	}
	if k.limit == 0 {
		return []string{md}
	}
	if k.sp == nil {
		if k.pool != nil {
			k.sp = k.pool.For(k.dialect)
		} else {
			k.sp = chat.NewSplitter(k.dialect)
		}
	}
	return k.sp.Split(md, k.limit)
}
