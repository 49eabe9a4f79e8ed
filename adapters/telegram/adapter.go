package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// platform is this adapter's chat.Platform.
const platform chat.Platform = "telegram"

// maxLen is the longest rendered message in UTF-16 units, with headroom
// under Telegram's 4096.
const maxLen = 4000

// Adapter connects pibot to one Telegram bot. Create it with New. It
// implements the chat interfaces by delegating to the parts that do the
// work: the poller or the webhook receives updates, the reader turns them
// into events, the sender, answerer and transfers make the outbound calls,
// and all calls go through one caller (pacing, retries, redaction).
type Adapter struct {
	mode      string
	calls     *caller
	reader    *reader
	poller    *poller
	webhook   *webhook
	sender    *sender
	answerer  *answerer
	transfers *transfers
	log       *slog.Logger

	refused atomic.Pointer[error] // why Run stopped for good: Telegram rejected the token
	// starting is why Run has not connected yet: getMe failed (the Bot
	// API does not answer) and is being retried; nil once it answered.
	starting atomic.Pointer[error]
}

// New validates cfg and builds an adapter. It makes no network call.
func New(cfg Config) (*Adapter, error) {
	if cfg.Token.IsZero() {
		return nil, errors.New("telegram: adapters.telegram.token is required (the bot token from @BotFather)")
	}
	if !strings.Contains(cfg.Token.Reveal(), ":") {
		return nil, errors.New("telegram: adapters.telegram.token does not look like a bot token (<bot id>:<secret>)")
	}
	root, err := APIRoot(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	cfg.APIURL = root
	switch cfg.Mode {
	case "":
		cfg.Mode = ModePolling
	case ModePolling, ModeWebhook:
	default:
		return nil, fmt.Errorf("telegram: adapters.telegram.mode %q must be %q or %q", cfg.Mode, ModePolling, ModeWebhook)
	}
	if len(cfg.AllowedUpdates) == 0 {
		cfg.AllowedUpdates = []string{"message", "callback_query"}
	}
	if cfg.PollTimeout <= 0 {
		cfg.PollTimeout = 50 * time.Second
	}
	if cfg.PollTimeout < time.Second {
		cfg.PollTimeout = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("adapter", "telegram")
	wh, err := newWebhook(cfg)
	if err != nil {
		return nil, err
	}
	calls := &caller{
		token:     cfg.Token,
		whSecret:  wh.secret,
		api:       cfg.APIURL,
		limiter:   newLimiter(cfg.Pacing.withDefaults(), cfg.Rates, botID(cfg.Token.Reveal())),
		log:       log,
		retryBase: 500 * time.Millisecond,
	}
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = statusTransport{base: rt}
	calls.client = &c
	b, err := bot.New(cfg.Token.Reveal(),
		bot.WithSkipGetMe(),
		bot.WithServerURL(cfg.APIURL),
		bot.WithHTTPClient(cfg.PollTimeout, calls.client),
		bot.WithErrorsHandler(func(err error) { log.Warn("telegram client", "err", calls.redact(err)) }),
		bot.WithDefaultHandler(func(context.Context, *bot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: new client: %s", secret.Redact(err.Error(), cfg.Token))
	}
	calls.bot = b

	chats := newChats(log)
	dec := &reader{chats: chats, me: identity{id: b.ID()}}
	wh.calls, wh.reader, wh.log = calls, dec, log
	out := &sender{calls: calls, chats: chats, log: log}
	out.draftSeq.Store(mrand.Int64N(1 << 30)) // draft ids: non-zero, distinct per stream
	return &Adapter{
		mode:   cfg.Mode,
		calls:  calls,
		reader: dec,
		poller: &poller{calls: calls, reader: dec, log: log, timeout: cfg.PollTimeout, allowed: cfg.AllowedUpdates,
			retryBase: calls.retryBase, conflictBase: 5 * time.Second},
		webhook:   wh,
		sender:    out,
		answerer:  &answerer{out: out, log: log},
		transfers: &transfers{calls: calls, chats: chats},
		log:       log,
	}, nil
}

// botID is the bot's numeric id: the public part of its token, before
// the colon.
func botID(token string) string {
	id, _, _ := strings.Cut(token, ":")
	return id
}

// Platform returns "telegram".
func (a *Adapter) Platform() chat.Platform { return platform }

// Caps returns what the adapter can do in conv: drafts in private chats,
// edits every 1.5 s there and every 3 s in groups (their 20/min pace
// covers every bot message).
func (a *Adapter) Caps(conv chat.ConvRef) chat.Caps {
	// An update not confirmed (polling) or answered non-2xx (webhook) is
	// delivered again by Telegram.
	c := chat.Caps{Dialect: chat.DialectTelegram, MaxLen: maxLen, EditInterval: 3 * time.Second, TypingRefresh: 4 * time.Second,
		Redelivery: chat.Redelivers}
	if conv.DM {
		c.EditInterval = 1500 * time.Millisecond
		c.NativeStream = true
	}
	return c
}

// Run learns the bot's identity (getMe), then receives updates until ctx
// ends and returns nil then. In polling mode it runs its own getUpdates
// loop and confirms an update (the next offset) only after sink returned
// nil for it; in webhook mode it registers the webhook and serves
// deliveries through WebhookHandler. A wrong token ends Run with an error.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	return a.RunBounded(ctx, sink, nil)
}

// RunBounded is Run under the polling lease (SingletonKey): held, if not
// nil, returns how long the lease is sure to stay held from now on (it
// grows with each renewal). Each long poll is then cut to end, on
// Telegram's side, before the lease may pass to another replica, so two
// replicas never poll at once, even when this process is frozen or cut
// off from the lease store with a poll open. Webhook mode ignores held.
func (a *Adapter) RunBounded(ctx context.Context, sink chat.Sink, held func() time.Duration) error {
	waiting := errors.New("telegram: starting: waiting for the Bot API to answer getMe")
	a.starting.Store(&waiting)
	me, err := a.calls.getMe(ctx, func(err error) {
		err = fmt.Errorf("telegram: starting: the Bot API has not answered getMe yet; retrying in the background: %s",
			strings.TrimPrefix(err.Error(), "telegram: "))
		a.starting.Store(&err)
	})
	a.starting.Store(nil)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		a.refused.Store(&err)
		return err
	}
	a.reader.learnt(me)
	a.log.Info("telegram: connected", "bot", "@"+me.username, "mode", a.mode)
	if a.mode == ModeWebhook {
		return a.webhook.run(ctx, sink)
	}
	if err := a.poller.run(ctx, sink, held); err != nil {
		a.refused.Store(&err)
		return err
	}
	return nil
}

// Health returns nil while the adapter can work, or why it cannot: it
// stopped because Telegram rejected the bot token (401), or it is still
// starting because the Bot API has not answered getMe (retried in the
// background). pibot keeps serving its other adapters and fails /readyz
// with this error.
func (a *Adapter) Health() error {
	if err := a.refused.Load(); err != nil {
		return *err
	}
	if err := a.starting.Load(); err != nil {
		return *err
	}
	return nil
}

// SingletonKey names the lease a polling adapter runs under: Telegram
// lets one getUpdates caller per bot at a time, so in cluster mode only
// one replica may poll. In webhook mode any replica may take a delivery
// and no lease is needed (""). The key holds the bot's numeric id (the
// public part of the token), never the token.
func (a *Adapter) SingletonKey() string {
	if a.mode == ModeWebhook {
		return ""
	}
	return "telegram/poll/" + strconv.FormatInt(a.calls.bot.ID(), 10)
}

// WebhookPath returns the unguessable path (derived from the webhook
// secret) where the server must mount WebhookHandler; "" in polling mode.
func (a *Adapter) WebhookPath() string { return a.webhook.path }

// WebhookHandler serves Telegram's webhook deliveries. A request without
// the right secret token gets 403 before its body is read (constant-time
// compare); an update is answered 200 only after the sink returned nil for
// it, and 500 otherwise so that Telegram sends it again. Before Run has
// registered the webhook it answers 503.
func (a *Adapter) WebhookHandler() http.Handler { return a.webhook }

// Send posts m, split into several messages if its rendering is longer
// than Caps.MaxLen (buttons go on the last one, the reply on the first),
// and returns the last message. A group that became a supergroup is
// followed: the message goes to the new chat and the returned reference
// names it. When Telegram cannot parse the HTML, the text goes as plain
// text.
func (a *Adapter) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	return a.sender.send(ctx, conv, m)
}

// Edit replaces a message's text and buttons (no buttons removes the
// keyboard). "Not modified" is success; a vanished message is
// chat.ErrNotFound; a bot-wide retry_after pause or a chat over its
// pace is a *chat.RateLimitError (edits never wait it out).
func (a *Adapter) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	return a.sender.edit(ctx, ref, m)
}

// Delete deletes a message.
func (a *Adapter) Delete(ctx context.Context, ref chat.MsgRef) error {
	return a.sender.delete(ctx, ref)
}

// SetStatus shows "typing…" for about 5 s (refresh every
// Caps.TypingRefresh); Telegram cannot clear it, so "" does nothing.
func (a *Adapter) SetStatus(ctx context.Context, conv chat.ConvRef, status string) error {
	return a.sender.setStatus(ctx, conv, status)
}

// React sets the bot's reaction on a message (Telegram allows a fixed set
// of emoji).
func (a *Adapter) React(ctx context.Context, ref chat.MsgRef, emoji string) error {
	return a.sender.react(ctx, ref, emoji)
}

// RegisterCommands publishes the command menu with setMyCommands. Names
// must be 1-32 characters of a-z, 0-9 and _; descriptions 1-256.
func (a *Adapter) RegisterCommands(ctx context.Context, cmds []chat.CommandSpec) error {
	return a.sender.registerCommands(ctx, cmds)
}

// OpenStream starts a native stream in a private chat: Update shows the
// text as a draft (sendMessageDraft, animated under one draft id), Finish
// sends the final message. Groups have no drafts; use Send and Edit there.
// The recipient options are not needed: a private chat has one user.
func (a *Adapter) OpenStream(ctx context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	return a.sender.openStream(ctx, conv, opts)
}

// Answer answers a button press. Before the deadline, answerCallbackQuery
// carries the toast (this ends the client's spinner, so it goes first);
// after it, or when Telegram says the query is too old, the toast is sent
// as a normal, silent message replying to the pressed message. Then, if
// r.Replace is set, the message that carried the buttons is edited: new
// text and buttons, or with an empty Markdown only the keyboard is removed
// (or replaced). r.Reply is sent as a normal message (Telegram has no
// ephemeral messages). The handle needs no state of this process: any
// replica's adapter answers it.
func (a *Adapter) Answer(ctx context.Context, ix chat.Interaction, r chat.Answer) (chat.MsgRef, error) {
	return a.answerer.answer(ctx, ix, r)
}

// Upload sends a file: images (jpeg, png, webp up to 10 MB) with
// sendPhoto, everything else with sendDocument. The caption is sent as
// plain text. Uploads are not retried (the reader is consumed).
func (a *Adapter) Upload(ctx context.Context, conv chat.ConvRef, f chat.OutFile, replyTo *chat.MsgRef) (chat.MsgRef, error) {
	return a.transfers.upload(ctx, conv, f, replyTo)
}

// Download writes an inbound file to w: getFile, then the file URL (which
// holds the token, so it is never logged). Files over 20 MB fail with a
// clear error: the cloud Bot API does not serve them.
func (a *Adapter) Download(ctx context.Context, f chat.FileRef, w io.Writer) error {
	return a.transfers.download(ctx, f, w)
}
