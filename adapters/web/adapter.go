package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
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
	// Bus, when set, carries the chat's events between the replicas of a
	// cluster, so that every replica's browsers see every reply; nil: the
	// chat shows what this process writes.
	Bus Bus
	// Notice is markdown the page shows in a conversation without
	// messages, above the usual hint (cmd/pibot: what to configure when
	// no model is); "" for none.
	Notice string
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
//
// The bot side (Send, Edit, SetStatus, Answer) writes to the conversation
// logs (store); the browser side is the HTTP API (api), which hands
// inbound events to the active Run (feeder) and serves history (history).
// With a Bus the logs are shared with the other replicas (relay).
type Adapter struct {
	store   *convStore
	relay   *relay
	feeder  *feeder
	history *historyAPI
	api     *api
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
	store := &convStore{epoch: newEpoch(), convs: make(map[string]*convLog)}
	rl := newRelay(cfg.Bus, store, log)
	fd := &feeder{log: log, started: make(chan struct{})}
	hist := &historyAPI{log: log}
	return &Adapter{
		store:   store,
		relay:   rl,
		feeder:  fd,
		history: hist,
		api:     &api{static: static, token: cfg.Token, log: log, store: store, relay: rl, feeder: fd, history: hist, notice: cfg.Notice},
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
		// A message not taken shows why beside it, with Retry.
		Redelivery: chat.ShowsRefusal,
	}
}

// Run hands browser events to sink until ctx ends, then waits for the
// events being fed and returns nil. The HTTP API answers 503 while
// Run is not active. With a Bus, Run also publishes this adapter's events
// to the other replicas and applies theirs; what is written while Run is
// not active is published when it runs (up to a bounded queue).
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.relay.run(rctx)
	}()
	err := a.feeder.run(ctx, sink)
	cancel()
	<-done
	return err
}

// Handler returns the web chat's HTTP handler, to be mounted at "/". It
// serves the UI at "/" and "/assets/", and the API under "/api/".
func (a *Adapter) Handler() http.Handler { return a.api.handler() }

// UseHistory implements chat.HistoryUser: the gateway hands the adapter
// the web platform's history, which /api/history and /api/conversations
// serve. Without it both answer with empty lists.
func (a *Adapter) UseHistory(h chat.History) { a.history.use(h) }

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
		ID:      a.store.newID("b"),
		Thread:  conv.Thread,
		From:    fromBot,
		Text:    m.Markdown,
		Buttons: wireButtons(m.Buttons),
		ReplyTo: wireRefOf(m.ReplyTo),
		Time:    time.Now().UTC(),
	}
	a.store.mu.Lock()
	a.store.conv(conv.Channel).add(msg)
	a.relay.messageLocked(conv.Channel, msg)
	a.store.mu.Unlock()
	return chat.MsgRef{Conv: conv, ID: msg.ID}, nil
}

// Edit replaces the text and buttons of a bot message. It returns an error
// wrapping chat.ErrNotFound if the message is unknown (never sent, or
// dropped from the conversation log).
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	if err := checkOut(m); err != nil {
		return fmt.Errorf("web: edit: %w", err)
	}
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	l := a.store.convs[ref.Conv.Channel]
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
	a.relay.messageLocked(ref.Conv.Channel, msg)
	return nil
}

// SetStatus shows a status line ("thinking…") under the conversation's
// messages; "" clears it.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	if err := checkConv(conv); err != nil {
		return fmt.Errorf("web: status: %w", err)
	}
	a.store.mu.Lock()
	n := a.store.conv(conv.Channel).status(conv.Thread, status, time.Now())
	a.relay.noticeLocked(conv.Channel, n)
	a.store.mu.Unlock()
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
			a.store.mu.Lock()
			if l := a.store.convs[ix.Msg.Conv.Channel]; l != nil && l.msgs[ix.Msg.ID] != nil {
				out.Markdown = l.msgs[ix.Msg.ID].Text
			}
			a.store.mu.Unlock()
		}
		if err := a.Edit(ctx, ix.Msg, out); err != nil {
			return chat.MsgRef{}, fmt.Errorf("web: answer: %w", err)
		}
	}
	if r.Toast != "" {
		a.store.mu.Lock()
		n := a.store.conv(ix.Conv.Channel).toast(ix.Conv.Thread, r.Toast)
		a.relay.noticeLocked(ix.Conv.Channel, n)
		a.store.mu.Unlock()
	}
	if r.Reply == nil {
		return chat.MsgRef{}, nil
	}
	return a.Send(ctx, ix.Conv, *r.Reply)
}

// newEpoch returns this adapter's epoch: its start time and a random
// part, so that replicas started at the same moment never share message
// or event ids.
func newEpoch() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().UnixNano(), 36) + hex.EncodeToString(b[:])
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
