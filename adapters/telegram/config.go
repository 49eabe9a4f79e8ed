package telegram

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// Modes of receiving updates.
const (
	ModePolling = "polling"
	ModeWebhook = "webhook"
)

// Config configures the Telegram adapter (config keys adapters.telegram.*).
type Config struct {
	// Token is the bot token from BotFather (adapters.telegram.token).
	Token secret.Secret
	// APIURL is the Bot API server (adapters.telegram.api_url); default
	// https://api.telegram.org.
	APIURL string
	// Mode is "polling" (default) or "webhook" (adapters.telegram.mode).
	Mode string
	// WebhookURL is the public base URL of pibot's HTTP listener; the
	// adapter registers WebhookURL + WebhookPath() with Telegram
	// (adapters.telegram.webhook_url). Required in webhook mode.
	WebhookURL string
	// WebhookSecret is the secret_token Telegram echoes on every delivery;
	// the webhook path is derived from it. Empty: a random one per start
	// (adapters.telegram.webhook_secret).
	WebhookSecret secret.Secret
	// AllowedUpdates lists the update kinds to receive; default message and
	// callback_query (adapters.telegram.allowed_updates).
	AllowedUpdates []string
	// PollTimeout is the long-poll timeout; default 50 s.
	PollTimeout time.Duration
	// Logger receives the adapter's logs; nil discards them.
	Logger *slog.Logger
	// HTTPClient makes the Bot API calls; nil: a client without a timeout
	// (every call has its own deadline).
	HTTPClient *http.Client
	// Pacing sets the outbound pacing; zero fields take defaults.
	Pacing Pacing
	// Rates keeps the buckets of Pacing; nil: in this process. Cluster
	// mode passes one the replicas share.
	Rates Rates
}

// Pacing is the adapter's outbound pacing, applied before every send,
// edit and draft. Zero fields take the Bot FAQ defaults.
type Pacing struct {
	PrivatePerSec float64 // per private chat; default 1
	PrivateBurst  int     // default 3
	GroupPerMin   float64 // per group or supergroup; default 20
	GroupBurst    int     // default 3
	GlobalPerSec  float64 // whole bot; default 30
}

func (b Pacing) withDefaults() Pacing {
	if b.PrivatePerSec <= 0 {
		b.PrivatePerSec = 1
	}
	if b.PrivateBurst <= 0 {
		b.PrivateBurst = 3
	}
	if b.GroupPerMin <= 0 {
		b.GroupPerMin = 20
	}
	if b.GroupBurst <= 0 {
		b.GroupBurst = 3
	}
	if b.GlobalPerSec <= 0 {
		b.GlobalPerSec = 30
	}
	return b
}

// validSecretToken reports whether s is 1-256 characters of A-Z, a-z,
// 0-9, _ and -, what Telegram accepts as a webhook secret token. (A loop:
// the regular expression with {1,256} cost every start of pibot 240 KB.)
func validSecretToken(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Adapter connects pibot to one Telegram bot. Create it with New.
type Adapter struct {
	cfg     Config
	token   secret.Secret
	api     string
	log     *slog.Logger
	client  *http.Client
	bot     *bot.Bot
	limiter *limiter

	whSecret secret.Secret
	whPath   string

	// retryBase and conflictBase are the first back-off steps.
	retryBase    time.Duration
	conflictBase time.Duration

	draftSeq atomic.Int64

	mu       sync.Mutex
	refused  error // why Run stopped for good: Telegram rejected the token
	me       identity
	sink     chat.Sink
	migrated map[int64]int64
}

// identity is the bot's own user.
type identity struct {
	id       int64
	username string
}

// New validates cfg and builds an adapter. It makes no network call.
func New(cfg Config) (*Adapter, error) {
	if cfg.Token.IsZero() {
		return nil, errors.New("telegram: adapters.telegram.token is required (the bot token from @BotFather)")
	}
	if !strings.Contains(cfg.Token.Reveal(), ":") {
		return nil, errors.New("telegram: adapters.telegram.token does not look like a bot token (<bot id>:<secret>)")
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api.telegram.org"
	}
	if u, err := url.Parse(cfg.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("telegram: adapters.telegram.api_url %q is not an http(s) URL", cfg.APIURL)
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
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
	a := &Adapter{
		cfg:          cfg,
		token:        cfg.Token,
		api:          cfg.APIURL,
		log:          log.With("adapter", "telegram"),
		limiter:      newLimiter(cfg.Pacing.withDefaults(), cfg.Rates, botID(cfg.Token.Reveal())),
		retryBase:    500 * time.Millisecond,
		conflictBase: 5 * time.Second,
		migrated:     map[int64]int64{},
	}
	if err := a.setupWebhook(); err != nil {
		return nil, err
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
	a.client = &c
	b, err := bot.New(cfg.Token.Reveal(),
		bot.WithSkipGetMe(),
		bot.WithServerURL(cfg.APIURL),
		bot.WithHTTPClient(cfg.PollTimeout, a.client),
		bot.WithErrorsHandler(func(err error) { a.log.Warn("telegram client", "err", a.redact(err)) }),
		bot.WithDefaultHandler(func(context.Context, *bot.Bot, *models.Update) {}),
	)
	if err != nil {
		return nil, fmt.Errorf("telegram: new client: %s", secret.Redact(err.Error(), cfg.Token))
	}
	a.bot = b
	a.me.id = b.ID()
	a.draftSeq.Store(mrand.Int64N(1 << 30)) // draft ids: non-zero, distinct per stream
	return a, nil
}

// botID is the bot's numeric id: the public part of its token, before
// the colon.
func botID(token string) string {
	id, _, _ := strings.Cut(token, ":")
	return id
}

// setupWebhook validates the webhook settings and derives the path.
func (a *Adapter) setupWebhook() error {
	if a.cfg.Mode != ModeWebhook {
		return nil
	}
	if a.cfg.WebhookURL == "" {
		return errors.New("telegram: adapters.telegram.webhook_url is required in webhook mode (the public https base URL of pibot)")
	}
	if u, err := url.Parse(a.cfg.WebhookURL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("telegram: adapters.telegram.webhook_url %q is not an http(s) URL", a.cfg.WebhookURL)
	}
	a.whSecret = a.cfg.WebhookSecret
	if a.whSecret.IsZero() {
		var b [32]byte
		_, _ = rand.Read(b[:])
		a.whSecret = secret.New(hex.EncodeToString(b[:]))
	}
	if !validSecretToken(a.whSecret.Reveal()) {
		return errors.New("telegram: adapters.telegram.webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
	}
	sum := sha256.Sum256([]byte("pibot telegram webhook path\x00" + a.whSecret.Reveal()))
	a.whPath = "/telegram/" + hex.EncodeToString(sum[:16])
	return nil
}
