package slack

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// Modes of receiving events.
const (
	ModeSocket = "socket"
	ModeHTTP   = "http"
)

// EventsPath is where EventsHandler is mounted on http.listen in http mode
// (Bolt's convention): events, slash commands and interactivity.
const EventsPath = "/slack/events"

// DefaultAPIURL is Slack's Web API base.
const DefaultAPIURL = "https://slack.com/api/"

// APIRoot is the base every Web API call of the adapter goes to
// (ROOT + "auth.test"), resolved from adapters.slack.api_url:
// DefaultAPIURL when empty, else the URL itself, which must end with a
// slash. `pibot doctor` checks the tokens at the same base.
func APIRoot(apiURL string) (string, error) {
	if apiURL == "" {
		return DefaultAPIURL, nil
	}
	u, err := url.Parse(apiURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("slack: adapters.slack.api_url %q is not an http(s) URL", apiURL)
	}
	if !strings.HasSuffix(apiURL, "/") {
		return "", fmt.Errorf("slack: adapters.slack.api_url %q must end with a slash (like %s)", apiURL, DefaultAPIURL)
	}
	return apiURL, nil
}

// Config configures the Slack adapter (config keys adapters.slack.*).
type Config struct {
	// BotToken is the xoxb- bot token (adapters.slack.bot_token).
	BotToken secret.Secret
	// AppToken is the xapp- app-level token for Socket Mode
	// (adapters.slack.app_token); unused in http mode.
	AppToken secret.Secret
	// SigningSecret verifies HTTP deliveries (adapters.slack.signing_secret);
	// unused in socket mode.
	SigningSecret secret.Secret
	// Mode is "socket" (default) or "http" (adapters.slack.mode).
	Mode string
	// APIURL replaces https://slack.com/api/ for every Web API call; it
	// ends with a slash (adapters.slack.api_url).
	APIURL string
	// Command is the slash command, default "/pi" (adapters.slack.command).
	Command string
	// MaxDownload caps the size of a file users attach; default 20 MiB.
	MaxDownload int64
	// Logger receives the adapter's logs; nil discards them.
	Logger *slog.Logger
	// HTTPClient makes the Web API calls; nil: a client with a 60 s timeout.
	HTTPClient *http.Client
	// Tiers overrides the per-method paces (calls per minute across the
	// workspace); missing methods take the defaults of Slack's tiers.
	Tiers map[string]float64
	// Rates keeps the buckets of the pace; nil: in this process. Cluster
	// mode passes one the replicas share.
	Rates tokenbucket.Rates
	// PingInterval is the longest Socket Mode waits for Slack's websocket
	// ping before it reconnects; default 30 s.
	PingInterval time.Duration
}

// retryBase is the first back-off step of retries and reconnects.
const retryBase = 500 * time.Millisecond

// Adapter connects pibot to one Slack app in one workspace. Create it with
// New.
type Adapter struct {
	cfg   Config
	api   *slackapi.Client
	log   *slog.Logger
	calls *caller

	rd       *reader   // deliveries → chat.Inbound
	recv     *receiver // Socket Mode and HTTP deliveries
	out      *sender   // posts and updates
	answerer *answerer // interactions

	mu     sync.Mutex
	noAsst bool // the assistant status is refused (no scope, not an assistant thread)
}

// New validates cfg and builds an adapter. It makes no network call.
func New(cfg Config) (*Adapter, error) {
	if cfg.BotToken.IsZero() {
		return nil, errors.New("slack: adapters.slack.bot_token is required (the xoxb- bot token of the app)")
	}
	if !strings.HasPrefix(cfg.BotToken.Reveal(), "xoxb-") {
		return nil, errors.New("slack: adapters.slack.bot_token does not look like a bot token (xoxb-…)")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeSocket
	case ModeSocket, ModeHTTP:
	default:
		return nil, fmt.Errorf("slack: adapters.slack.mode %q must be %q or %q", cfg.Mode, ModeSocket, ModeHTTP)
	}
	if cfg.Mode == ModeSocket && cfg.AppToken.IsZero() {
		return nil, errors.New("slack: adapters.slack.app_token is required in socket mode (an xapp- app-level token with connections:write)")
	}
	if cfg.Mode == ModeSocket && !strings.HasPrefix(cfg.AppToken.Reveal(), "xapp-") {
		return nil, errors.New("slack: adapters.slack.app_token does not look like an app-level token (xapp-…)")
	}
	if cfg.Mode == ModeHTTP && cfg.SigningSecret.IsZero() {
		return nil, errors.New("slack: adapters.slack.signing_secret is required in http mode")
	}
	root, err := APIRoot(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	cfg.APIURL = root
	u, _ := url.Parse(root) // APIRoot parsed it
	if cfg.Command == "" {
		cfg.Command = "/pi"
	}
	if cfg.MaxDownload <= 0 {
		cfg.MaxDownload = 20 << 20
	}
	if cfg.PingInterval <= 0 {
		cfg.PingInterval = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 60 * time.Second}
	}
	opts := []slackapi.Option{slackapi.OptionAPIURL(cfg.APIURL), slackapi.OptionHTTPClient(client)}
	if !cfg.AppToken.IsZero() {
		opts = append(opts, slackapi.OptionAppLevelToken(cfg.AppToken.Reveal()))
	}
	a := &Adapter{
		cfg: cfg,
		api: slackapi.New(cfg.BotToken.Reveal(), opts...),
		log: log.With("adapter", "slack"),
	}
	a.rd = &reader{log: a.log}
	a.recv = &receiver{cfg: cfg, api: a.api, rd: a.rd, log: a.log, retryBase: retryBase, ready: make(chan struct{})}
	a.calls = &caller{limiter: newLimiter(cfg.Tiers, cfg.Rates), log: a.log, retryBase: retryBase,
		secrets: []secret.Secret{cfg.BotToken, cfg.AppToken, cfg.SigningSecret}, scopes: map[string]bool{}}
	a.recv.calls = a.calls
	a.out = &sender{calls: a.calls, api: a.api}
	a.answerer = &answerer{out: a.out, calls: a.calls, api: a.api, log: a.log, apiHost: u.Host}
	return a, nil
}

// Mode returns "socket" or "http".
func (a *Adapter) Mode() string { return a.cfg.Mode }
