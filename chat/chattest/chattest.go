// Package chattest provides an in-memory chat.Adapter for gateway tests.
//
// An Adapter records every outbound call (method, conversation, message,
// text, buttons, time, returned error), keeps the visible state of every
// message it "posted" (after edits and deletions), delivers injected inbound
// events to the sink given to Run, and can inject faults: the next N calls of
// a method fail with a chosen error, and an optional rate model answers with
// *chat.RateLimitError when a conversation exceeds K calls per window. Any
// call that arrives before an announced retry-after has expired is recorded
// as a Violation.
//
// The Adapter implements chat.Adapter and every optional interface except
// chat.Streamer and chat.ThreadOpener; Streaming returns a view of the same
// adapter that also implements chat.Streamer (append-only when the Caps say
// AppendOnly), Threads one that also implements chat.ThreadOpener. It
// passes the adapter conformance suite in chattest/adaptertest, like every
// real adapter must. Time comes from time.Now unless WithClock is
// given, so tests under testing/synctest see the bubble's fake clock.
package chattest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// Method names one outbound operation of the adapter.
type Method string

// Recorded methods.
const (
	MethodSend         Method = "send"
	MethodEdit         Method = "edit"
	MethodDelete       Method = "delete"
	MethodStatus       Method = "status"
	MethodReact        Method = "react"
	MethodRespond      Method = "respond" // Responder.Answer
	MethodOpenThread   Method = "thread.open"
	MethodUpload       Method = "upload"
	MethodDownload     Method = "download"
	MethodCommands     Method = "commands"
	MethodOpenStream   Method = "stream.open"
	MethodStreamUpdate Method = "stream.update"
	MethodStreamFinish Method = "stream.finish"
	MethodStreamAbort  Method = "stream.abort"
)

// Call is one recorded outbound call.
type Call struct {
	Method Method
	Conv   chat.ConvRef
	// Ref is the message the call touched; for a successful send, the new
	// message.
	Ref chat.MsgRef
	// Text is the markdown (send, edit, stream), the status (status), the
	// emoji (react), the toast (respond), the thread name (thread.open) or
	// the file name (upload, download).
	Text    string
	Buttons [][]chat.Button
	ReplyTo *chat.MsgRef
	// Ephemeral is Out.Ephemeral of a send (or of an answer's reply).
	Ephemeral string
	// Recipient and RecipientTeam are the StreamOptions of stream.open.
	Recipient     string
	RecipientTeam string
	Time          time.Time
	// Err is the error the call returned.
	Err error
}

// File is an uploaded file.
type File struct {
	Name     string
	MimeType string
	Data     []byte
}

// Message is the visible state of one posted message.
type Message struct {
	Ref       chat.MsgRef
	Text      string
	Buttons   [][]chat.Button
	ReplyTo   *chat.MsgRef
	Reactions []string
	File      *File
	Deleted   bool
	// Ephemeral is the one user who sees the message (only when the Caps
	// say Ephemeral; otherwise ephemeral messages are posted normally).
	Ephemeral string
	// Edits counts successful edits that changed something.
	Edits int
}

// ErrServer is a 5xx-like failure for FailNext.
var ErrServer = errors.New("chattest: 502 bad gateway")

// RateLimited returns a chat-scoped *chat.RateLimitError for FailNext.
func RateLimited(retryAfter time.Duration) error {
	return &chat.RateLimitError{RetryAfter: retryAfter, Scope: "chat"}
}

// Option configures an Adapter.
type Option func(*Adapter)

// WithPlatform sets the platform name (default "test").
func WithPlatform(p chat.Platform) Option { return func(a *Adapter) { a.platform = p } }

// WithCaps sets the capabilities reported for DMs and for other
// conversations.
func WithCaps(dm, group chat.Caps) Option {
	return func(a *Adapter) { a.dmCaps, a.groupCaps = dm, group }
}

// WithClock replaces time.Now for call times and the rate model.
func WithClock(now func() time.Time) Option { return func(a *Adapter) { a.now = now } }

// WithoutCallLog keeps no record of calls, as a real platform keeps none
// in pibot's memory: for benchmarks, whose fake should not grow the heap
// the gateway's collector scans. Calls returns nothing, and WaitFor's
// condition sees no calls (it is still checked after each one).
func WithoutCallLog() Option { return func(a *Adapter) { a.unlogged = true } }

// WithRateLimit adds a rate model; see RateLimit.
func WithRateLimit(l RateLimit) Option { return func(a *Adapter) { a.limits = append(a.limits, l) } }

// Adapter is an in-memory chat.Adapter. The zero value is not usable; call
// New.
type Adapter struct {
	platform          chat.Platform
	dmCaps, groupCaps chat.Caps
	now               func() time.Time
	limits            []RateLimit

	unlogged bool // WithoutCallLog

	mu         sync.Mutex
	calls      callLog
	msgs       []*Message
	byKey      map[string]*Message
	nextID     int
	faults     map[Method][]error
	windows    map[string][]time.Time
	blocked    map[string]time.Time
	violations []Violation
	changed    chan struct{} // closed on the next recorded call; nil until WaitFor waits
	files      map[string][]byte
	commands   []chat.CommandSpec
	drafts     map[string]string
	status     map[string]string
	nextIx     int
	answered   map[string]bool // interaction ids

	// runMu guards sink and active, apart from mu: a platform hands
	// events over without waiting for the calls it is answering (at 1,000
	// streaming replies, Inject waited behind their edits' log).
	runMu  sync.Mutex
	sink   chat.Sink
	active chan struct{} // closed while Run is active
}

var (
	_ chat.Adapter          = (*Adapter)(nil)
	_ chat.Typer            = (*Adapter)(nil)
	_ chat.Reactor          = (*Adapter)(nil)
	_ chat.Deleter          = (*Adapter)(nil)
	_ chat.Responder        = (*Adapter)(nil)
	_ chat.Uploader         = (*Adapter)(nil)
	_ chat.Downloader       = (*Adapter)(nil)
	_ chat.CommandRegistrar = (*Adapter)(nil)
)

// New returns an Adapter configured by opts. Without WithCaps, both DMs and
// groups use the markdown dialect, MaxLen 4000 and a 4 s typing refresh; the
// edit interval is 1 s in DMs and 3 s in groups.
func New(opts ...Option) *Adapter {
	caps := chat.Caps{
		Dialect:       chat.DialectMarkdown,
		MaxLen:        4000,
		EditInterval:  time.Second,
		TypingRefresh: 4 * time.Second,
	}
	group := caps
	group.EditInterval = 3 * time.Second
	a := &Adapter{
		platform:  "test",
		dmCaps:    caps,
		groupCaps: group,
		now:       time.Now,
		byKey:     map[string]*Message{},
		faults:    map[Method][]error{},
		windows:   map[string][]time.Time{},
		blocked:   map[string]time.Time{},
		active:    make(chan struct{}),
		files:     map[string][]byte{},
		drafts:    map[string]string{},
		status:    map[string]string{},
		answered:  map[string]bool{},
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Platform returns the configured platform name.
func (a *Adapter) Platform() chat.Platform { return a.platform }

// Caps returns the DM or group capabilities, by conv.DM.
func (a *Adapter) Caps(conv chat.ConvRef) chat.Caps {
	if conv.DM {
		return a.dmCaps
	}
	return a.groupCaps
}

// Run makes the adapter deliver injected events to sink until ctx ends.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	a.runMu.Lock()
	if a.sink != nil {
		a.runMu.Unlock()
		return errors.New("chattest: run: already running")
	}
	a.sink = sink
	close(a.active)
	a.runMu.Unlock()
	<-ctx.Done()
	a.runMu.Lock()
	a.sink = nil
	a.active = make(chan struct{})
	a.runMu.Unlock()
	return nil
}

// Inject delivers in to the sink given to Run, waiting until Run is active,
// and returns the sink's error. A button press without an Interaction gets
// one, as a platform's would: answerable until a minute after now.
func (a *Adapter) Inject(ctx context.Context, in chat.Inbound) error {
	if in.Kind == chat.KindAction && in.Interaction == nil && in.Action != nil {
		in.Interaction = a.interaction(in)
	}
	for {
		a.runMu.Lock()
		sink, active := a.sink, a.active
		a.runMu.Unlock()
		if sink != nil {
			return sink(ctx, in)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-active:
		}
	}
}

// Send posts a message. A button id longer than the Caps allow is an
// error; an ephemeral message (when the Caps say Ephemeral) comes back
// with an empty ID.
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodSend, Conv: conv, Text: m.Markdown, Buttons: m.Buttons, ReplyTo: m.ReplyTo, Ephemeral: m.Ephemeral}
	if err := a.checkOutLocked(&c, conv, m); err != nil {
		return chat.MsgRef{}, err
	}
	if err := a.beginLocked(&c, ""); err != nil {
		return chat.MsgRef{}, err
	}
	ref := a.sendLocked(conv, m)
	c.Ref = ref
	a.recordLocked(c)
	return ref, nil
}

// sendLocked posts m, honouring Out.Ephemeral as the Caps say.
func (a *Adapter) sendLocked(conv chat.ConvRef, m chat.Out) chat.MsgRef {
	msg := a.postLocked(conv, m)
	if m.Ephemeral != "" && a.Caps(conv).Ephemeral {
		msg.Ephemeral = m.Ephemeral
		return chat.MsgRef{Conv: conv}
	}
	return msg.Ref
}

// checkOutLocked rejects button ids the Caps do not allow, recording c as
// failed.
func (a *Adapter) checkOutLocked(c *Call, conv chat.ConvRef, m chat.Out) error {
	limit := a.Caps(conv).MaxButtonID
	if limit == 0 {
		limit = chat.MaxButtonID
	}
	for _, row := range m.Buttons {
		for _, b := range row {
			if b.ID == "" || len(b.ID) > limit {
				c.Time = a.now()
				c.Err = fmt.Errorf("chattest: button %q: id is %d bytes, limit %d", b.Label, len(b.ID), limit)
				a.recordLocked(*c)
				return c.Err
			}
		}
	}
	return nil
}

// Edit replaces a message's text and buttons; chat.ErrNotFound if the
// message does not exist or was deleted.
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodEdit, Conv: ref.Conv, Ref: ref, Text: m.Markdown, Buttons: m.Buttons}
	if err := a.checkOutLocked(&c, ref.Conv, m); err != nil {
		return err
	}
	if err := a.beginLocked(&c, ref.Key()); err != nil {
		return err
	}
	msg, err := a.liveLocked(&c, ref)
	if err != nil {
		return err
	}
	if msg.Text != m.Markdown || !slices.EqualFunc(msg.Buttons, m.Buttons, slices.Equal) {
		msg.Text, msg.Buttons = m.Markdown, m.Buttons
		msg.Edits++
	}
	a.recordLocked(c)
	return nil
}

// Delete marks a message deleted.
func (a *Adapter) Delete(ctx context.Context, ref chat.MsgRef) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodDelete, Conv: ref.Conv, Ref: ref}
	if err := a.beginLocked(&c, ref.Key()); err != nil {
		return err
	}
	msg, err := a.liveLocked(&c, ref)
	if err != nil {
		return err
	}
	msg.Deleted = true
	a.recordLocked(c)
	return nil
}

// SetStatus records the typing/status indicator of conv.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodStatus, Conv: conv, Text: status}
	if err := a.beginLocked(&c, ""); err != nil {
		return err
	}
	a.status[conv.Key()] = status
	a.recordLocked(c)
	return nil
}

// React adds emoji to a message.
func (a *Adapter) React(ctx context.Context, ref chat.MsgRef, emoji string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodReact, Conv: ref.Conv, Ref: ref, Text: emoji}
	if err := a.beginLocked(&c, ref.Key()); err != nil {
		return err
	}
	msg, err := a.liveLocked(&c, ref)
	if err != nil {
		return err
	}
	msg.Reactions = append(msg.Reactions, emoji)
	a.recordLocked(c)
	return nil
}

// Upload posts a file as a message whose text is the caption.
func (a *Adapter) Upload(ctx context.Context, conv chat.ConvRef, f chat.OutFile, replyTo *chat.MsgRef) (chat.MsgRef, error) {
	var data []byte
	if f.Reader != nil {
		var err error
		if data, err = io.ReadAll(f.Reader); err != nil {
			return chat.MsgRef{}, err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodUpload, Conv: conv, Text: f.Name, ReplyTo: replyTo}
	if err := a.beginLocked(&c, ""); err != nil {
		return chat.MsgRef{}, err
	}
	msg := a.postLocked(conv, chat.Out{Markdown: f.Caption, ReplyTo: replyTo})
	msg.File = &File{Name: f.Name, MimeType: f.MimeType, Data: data}
	c.Ref = msg.Ref
	a.recordLocked(c)
	return msg.Ref, nil
}

// SetFile makes Download serve data for the file id.
func (a *Adapter) SetFile(id string, data []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[id] = slices.Clone(data)
}

// Download writes the data given to SetFile; chat.ErrNotFound if none.
func (a *Adapter) Download(ctx context.Context, f chat.FileRef, w io.Writer) error {
	a.mu.Lock()
	c := Call{Method: MethodDownload, Text: f.ID}
	if err := a.beginLocked(&c, ""); err != nil {
		a.mu.Unlock()
		return err
	}
	data, ok := a.files[f.ID]
	if !ok {
		c.Err = chat.ErrNotFound
	}
	a.recordLocked(c)
	a.mu.Unlock()
	if !ok {
		return chat.ErrNotFound
	}
	_, err := w.Write(data)
	return err
}

// RegisterCommands records the command list.
func (a *Adapter) RegisterCommands(ctx context.Context, cmds []chat.CommandSpec) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := Call{Method: MethodCommands}
	if err := a.beginLocked(&c, ""); err != nil {
		return err
	}
	a.commands = slices.Clone(cmds)
	a.recordLocked(c)
	return nil
}

// postLocked creates a message.
func (a *Adapter) postLocked(conv chat.ConvRef, m chat.Out) *Message {
	a.nextID++
	msg := &Message{
		Ref:     chat.MsgRef{Conv: conv, ID: strconv.Itoa(a.nextID)},
		Text:    m.Markdown,
		Buttons: m.Buttons,
		ReplyTo: m.ReplyTo,
	}
	a.msgs = append(a.msgs, msg)
	a.byKey[msg.Ref.Key()] = msg
	return msg
}

// liveLocked finds a message that was not deleted, recording c as failed
// with chat.ErrNotFound otherwise.
func (a *Adapter) liveLocked(c *Call, ref chat.MsgRef) (*Message, error) {
	msg, ok := a.byKey[ref.Key()]
	if !ok || msg.Deleted || msg.Ephemeral != "" {
		c.Err = chat.ErrNotFound
		a.recordLocked(*c)
		return nil, chat.ErrNotFound
	}
	return msg, nil
}

// recordLocked appends c and wakes WaitFor.
func (a *Adapter) recordLocked(c Call) {
	if !a.unlogged {
		a.calls.add(c)
	}
	if a.changed != nil {
		close(a.changed)
		a.changed = nil
	}
}
