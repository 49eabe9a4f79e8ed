package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// Platform is the web chat's platform name.
const Platform chat.Platform = "web"

// UserID is the id of the web chat's one user (the gateway treats it, on
// loopback, as the owner); the user's display name is "you".
const UserID = "local"

func localUser() chat.User { return chat.User{ID: UserID, Name: "you"} }

// Limits of the web chat.
const (
	// MaxLen is the longest outbound message, in characters.
	MaxLen = 20000
	// EditInterval is the minimum time between edits of one message.
	EditInterval = 250 * time.Millisecond
	// StatusRefresh is how often the gateway refreshes the status line.
	StatusRefresh = time.Second
	// maxInboundText is the longest message a browser may send, in bytes.
	maxInboundText = 256 << 10
)

// Config configures the web chat.
type Config struct {
	// Token must accompany every request when set. It is required when
	// the listener is not on loopback (see RequireToken).
	Token secret.Secret
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// RequireToken reports whether a web chat served on listenAddr
// ("host:port") must be protected by a token: true unless the host is a
// loopback name or address. An empty host (":8080") listens on every
// interface and needs a token.
func RequireToken(listenAddr string) bool {
	host, _, err := net.SplitHostPort(listenAddr)
	if err != nil {
		host = listenAddr
	}
	return !isLoopbackHost(host)
}

func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Adapter is the web chat. It implements chat.Adapter, chat.Typer and
// chat.Responder; its HTTP side is Handler. Send, Edit, SetStatus and
// Answer work whether or not Run is active (browsers see the messages on
// their next fetch); only inbound requests need Run. Out.Ephemeral posts a
// normal message: the web chat has a single user.
type Adapter struct {
	static fs.FS
	token  secret.Secret
	log    *slog.Logger
	// epoch distinguishes this process's message and event ids from those
	// of an earlier run.
	epoch string

	mu       sync.Mutex
	seq      uint64 // message ids
	events   uint64 // event ids
	convs    map[string]*convLog
	hist     chat.History  // nil until UseHistory
	sink     chat.Sink     // nil unless Run is active
	stop     chan struct{} // closed when the current Run ends
	inflight sync.WaitGroup
	// started is closed when Run first starts: requests that arrive just
	// before (the server listens before the gateway runs) wait for it.
	started     chan struct{}
	startedOnce sync.Once
}

// startWait bounds how long a request waits for Run to start.
const startWait = 5 * time.Second

// waitStarted waits until Run has started once, ctx ends or startWait
// passes.
func (a *Adapter) waitStarted(ctx context.Context) {
	t := time.NewTimer(startWait)
	defer t.Stop()
	select {
	case <-a.started:
	case <-ctx.Done():
	case <-t.C:
	}
}

// New returns a web chat adapter.
func New(cfg Config) (*Adapter, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	static, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, fmt.Errorf("web: assets: %w", err)
	}
	return &Adapter{
		static: static,
		token:  cfg.Token,
		log:    log,
		epoch:  strconv.FormatInt(time.Now().UnixNano(), 36),
		convs:  make(map[string]*convLog),

		started: make(chan struct{}),
	}, nil
}

// Platform returns "web".
func (a *Adapter) Platform() chat.Platform { return Platform }

// Caps returns the web chat's capabilities; they are the same for every
// conversation.
func (a *Adapter) Caps(chat.ConvRef) chat.Caps {
	return chat.Caps{
		Dialect:      chat.DialectMarkdown,
		MaxLen:       MaxLen,
		EditInterval: EditInterval,
		// The status line is kept for the whole reply and refreshed
		// every second, so the browser shows what the agent does
		// ("running bash…", "writing…") while it works.
		TypingRefresh: StatusRefresh,
		StatusLine:    true,
	}
}

// Run hands browser events to sink until ctx ends, then waits for the
// events being delivered and returns nil. The HTTP API answers 503 while
// Run is not active.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	if sink == nil {
		return errors.New("web: run: nil sink")
	}
	a.mu.Lock()
	if a.sink != nil {
		a.mu.Unlock()
		return errors.New("web: run: already running")
	}
	a.sink = sink
	a.stop = make(chan struct{})
	a.mu.Unlock()
	a.startedOnce.Do(func() { close(a.started) })
	a.log.Info("web chat running")

	<-ctx.Done()

	a.mu.Lock()
	a.sink = nil
	close(a.stop)
	a.mu.Unlock()
	a.inflight.Wait()
	return nil
}

// errNotRunning is returned to browsers while Run is not active.
var errNotRunning = errors.New("web chat is not running")

// deliver passes in to the sink of the active Run.
func (a *Adapter) deliver(ctx context.Context, in chat.Inbound) error {
	a.waitStarted(ctx)
	a.mu.Lock()
	sink := a.sink
	if sink == nil {
		a.mu.Unlock()
		return errNotRunning
	}
	a.inflight.Add(1)
	a.mu.Unlock()
	defer a.inflight.Done()
	return sink(ctx, in)
}

// running returns a channel closed when the active Run ends, or nil if
// Run is not active.
func (a *Adapter) running() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sink == nil {
		return nil
	}
	return a.stop
}

// newID returns a process-unique id starting with prefix.
func (a *Adapter) newID(prefix string) string {
	a.mu.Lock()
	a.seq++
	n := a.seq
	a.mu.Unlock()
	return prefix + a.epoch + "-" + strconv.FormatUint(n, 10)
}

func checkConv(conv chat.ConvRef) error {
	if conv.Platform != Platform {
		return fmt.Errorf("conversation %q is not a web conversation", conv.Key())
	}
	if !validID(conv.Channel) || (conv.Thread != "" && !validID(conv.Thread)) {
		return fmt.Errorf("bad web conversation %q", conv.Key())
	}
	return nil
}

func checkOut(m chat.Out) error {
	if n := chat.Len(m.Markdown, chat.DialectMarkdown); n > MaxLen {
		return fmt.Errorf("message is %d characters, limit %d", n, MaxLen)
	}
	for _, row := range m.Buttons {
		for _, b := range row {
			if b.ID == "" || len(b.ID) > chat.MaxButtonID {
				return fmt.Errorf("button %q: id must be 1 to %d bytes", b.Label, chat.MaxButtonID)
			}
		}
	}
	return nil
}

// Send posts a bot message to the conversation and returns its reference.
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	if err := checkConv(conv); err != nil {
		return chat.MsgRef{}, fmt.Errorf("web: send: %w", err)
	}
	if err := checkOut(m); err != nil {
		return chat.MsgRef{}, fmt.Errorf("web: send: %w", err)
	}
	msg := &message{
		ID:      a.newID("b"),
		Thread:  conv.Thread,
		From:    fromBot,
		Text:    m.Markdown,
		Buttons: wireButtons(m.Buttons),
		ReplyTo: wireRefOf(m.ReplyTo),
		Time:    time.Now().UTC(),
	}
	a.mu.Lock()
	a.conv(conv.Channel).add(msg)
	a.mu.Unlock()
	return chat.MsgRef{Conv: conv, ID: msg.ID}, nil
}

// Edit replaces the text and buttons of a bot message. It returns an error
// wrapping chat.ErrNotFound if the message is unknown (never sent, or
// dropped from the conversation log).
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	if err := checkOut(m); err != nil {
		return fmt.Errorf("web: edit: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.convs[ref.Conv.Channel]
	var msg *message
	if l != nil && ref.Conv.Platform == Platform {
		msg = l.msgs[ref.ID]
	}
	if msg == nil || msg.From != fromBot || msg.Thread != ref.Conv.Thread {
		return fmt.Errorf("web: edit %s: %w", ref.Key(), chat.ErrNotFound)
	}
	buttons := wireButtons(m.Buttons)
	if msg.Text == m.Markdown && equalButtons(msg.Buttons, buttons) {
		return nil
	}
	msg.Text = m.Markdown
	msg.Buttons = buttons
	l.update(msg)
	return nil
}

// SetStatus shows a status line ("thinking…") under the conversation's
// messages; "" clears it.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if err := checkConv(conv); err != nil {
		return fmt.Errorf("web: status: %w", err)
	}
	a.mu.Lock()
	a.conv(conv.Channel).status(conv.Thread, status, time.Now())
	a.mu.Unlock()
	return nil
}

// Answer answers a button press: Replace, if set, replaces the message
// that carried the button (only its buttons when Replace.Markdown is
// empty), the toast is shown briefly in the browser, and Reply is posted as
// a normal message (the web chat has one user, so an ephemeral message is
// just a message). Web interactions never expire.
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	if ix.Platform != Platform {
		return chat.MsgRef{}, errors.New("web: answer: not a web interaction")
	}
	if err := checkConv(ix.Conv); err != nil {
		return chat.MsgRef{}, fmt.Errorf("web: answer: %w", err)
	}
	if r.Replace != nil {
		out := *r.Replace
		if out.Markdown == "" {
			a.mu.Lock()
			if l := a.convs[ix.Msg.Conv.Channel]; l != nil && l.msgs[ix.Msg.ID] != nil {
				out.Markdown = l.msgs[ix.Msg.ID].Text
			}
			a.mu.Unlock()
		}
		if err := a.Edit(ctx, ix.Msg, out); err != nil {
			return chat.MsgRef{}, fmt.Errorf("web: answer: %w", err)
		}
	}
	if r.Toast != "" {
		a.mu.Lock()
		a.conv(ix.Conv.Channel).toast(ix.Conv.Thread, r.Toast)
		a.mu.Unlock()
	}
	if r.Reply == nil {
		return chat.MsgRef{}, nil
	}
	return a.Send(ctx, ix.Conv, *r.Reply)
}

// validID reports whether s is a usable conversation, thread or client
// message id: 1 to 64 ASCII letters, digits, '-' or '_'.
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
