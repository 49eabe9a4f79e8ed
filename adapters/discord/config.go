package discord

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

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/internal/secret"
)

// Config configures the Discord adapter (config keys adapters.discord.*).
type Config struct {
	// Token is the bot token from the developer portal
	// (adapters.discord.token), without the "Bot " prefix.
	Token secret.Secret
	// APIURL replaces https://discord.com for every REST call
	// (adapters.discord.api_url); empty for the real Discord.
	APIURL string
	// ApplicationID is the application's id (adapters.discord.application_id);
	// empty: learned from READY or GET /applications/@me.
	ApplicationID string
	// Guilds are the guilds whose commands are registered per guild
	// (adapters.discord.guilds); empty: one global registration.
	Guilds []string
	// Command is the application command's name (adapters.discord.command);
	// default "pi".
	Command string
	// MaxDownload caps an inbound attachment; default 20 MiB (the gateway takes no more).
	MaxDownload int64
	// Logger receives the adapter's logs; nil discards them.
	Logger *slog.Logger
	// HTTPClient is the base client for REST calls, gateway discovery and
	// downloads; nil: a client with a 30 s timeout.
	HTTPClient *http.Client
	// IdentifyBackoff is the first wait between two IDENTIFYs (it doubles
	// with every identify of the last 30 minutes, up to 10 min); default 5 s.
	IdentifyBackoff time.Duration
	// StatePath is a file where the gateway session and recent identifies
	// are kept, so that a restarted process resumes instead of
	// identifying, and a crash loop still spaces its identifies out; ""
	// keeps them in memory only.
	StatePath string
}

// DefaultAPIRoot is the root of Discord's REST API, the version the
// adapter speaks.
const DefaultAPIRoot = "https://discord.com" + apiPath

// apiPath is the path of the REST API's root on its host: every call is
// sent to API version 10, whatever version discordgo names.
const apiPath = "/api/v10"

// APIRoot is the root every REST call of the adapter goes to
// (ROOT/users/@me), resolved from adapters.discord.api_url, which
// replaces https://discord.com: DefaultAPIRoot when empty, else
// API_URL/api/v10. `pibot doctor` checks the token at the same root.
func APIRoot(apiURL string) (string, error) {
	if apiURL == "" {
		return DefaultAPIRoot, nil
	}
	base := strings.TrimRight(apiURL, "/")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return "", fmt.Errorf("discord: adapters.discord.api_url %q must be an http(s) base URL without a path", apiURL)
	}
	return base + apiPath, nil
}

// isID reports whether s is a Discord id, a decimal snowflake
// (^[0-9]{1,20}$). A function, not a regular expression compiled when the
// package loads (issue #15: heap in every pibot process).
func isID(s string) bool {
	if len(s) < 1 || len(s) > 20 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isCommand reports whether s is a command name pibot accepts
// (^[a-z0-9_-]{1,32}$).
func isCommand(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Adapter connects pibot to one Discord bot. Create it with New.
type Adapter struct {
	cfg    Config
	log    *slog.Logger
	rest   *restClient
	client *http.Client // downloads: no Authorization header, no rewrite
	api    *url.URL     // nil: the real Discord

	app    *application
	in     *reader
	edits  *editLog
	ix     *interactions
	gw     *gatewayClient
	feeder *feeder
}

// New validates cfg and builds an adapter. It makes no network call.
func New(cfg Config) (*Adapter, error) {
	if cfg.Token.IsZero() {
		return nil, errors.New("discord: adapters.discord.token is required (developer portal > your application > Bot > Reset Token)")
	}
	tok := strings.TrimPrefix(strings.TrimSpace(cfg.Token.Reveal()), "Bot ")
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return nil, errors.New("discord: adapters.discord.token does not look like a bot token")
	}
	cfg.Token = secret.New(tok)
	a := &Adapter{cfg: cfg, edits: &editLog{last: map[string]editMark{}}}
	root, err := APIRoot(cfg.APIURL)
	if err != nil {
		return nil, err
	}
	if cfg.APIURL != "" {
		a.api, _ = url.Parse(strings.TrimSuffix(root, apiPath)) // APIRoot parsed it
	}
	if cfg.ApplicationID != "" && !isID(cfg.ApplicationID) {
		return nil, fmt.Errorf("discord: adapters.discord.application_id %q is not a Discord id", cfg.ApplicationID)
	}
	for i, g := range cfg.Guilds {
		if !isID(g) {
			return nil, fmt.Errorf("discord: adapters.discord.guilds[%d] %q is not a Discord guild id", i, g)
		}
	}
	if a.cfg.Command == "" {
		a.cfg.Command = "pi"
	}
	if !isCommand(a.cfg.Command) {
		return nil, fmt.Errorf("discord: adapters.discord.command %q must be 1-32 characters of a-z, 0-9, _ and -", a.cfg.Command)
	}
	if a.cfg.MaxDownload <= 0 {
		a.cfg.MaxDownload = 20 << 20
	}
	if a.cfg.IdentifyBackoff <= 0 {
		a.cfg.IdentifyBackoff = 5 * time.Second
	}
	a.log = cfg.Logger
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a.log = a.log.With("adapter", "discord")
	base := cfg.HTTPClient
	if base == nil {
		base = &http.Client{Timeout: 30 * time.Second}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	plain := *base
	a.client = &plain
	a.rest = &restClient{log: a.log, token: cfg.Token, api: a.api, root: root, limiter: newLimiter()}
	hc := *base
	hc.Transport = &transport{r: a.rest, base: rt}
	s, err := discordgo.New("Bot " + tok)
	if err != nil {
		return nil, errors.New("discord: new client failed")
	}
	s.Client = &hc
	s.ShouldRetryOnRateLimit = false // a 429 is returned, never slept on without bound
	s.MaxRestRetries = 0             // 5xx retries are this adapter's, bounded
	s.LogLevel = -1                  // discordgo's own log stays silent (its debug level prints secrets)
	s.Debug = false
	s.UserAgent = "DiscordBot (https://github.com/pibot/pibot, 1) pibot"
	a.rest.s = s
	a.app = &application{rest: a.rest, id: cfg.ApplicationID}
	a.in = &reader{rest: a.rest, log: a.log, command: a.cfg.Command, app: a.app.known,
		channels: map[string]channelInfo{}, threads: map[string]bool{}}
	a.ix = &interactions{rest: a.rest, edits: a.edits, log: a.log, out: a, app: a.app.get, acking: map[string]chan struct{}{}}
	a.gw = &gatewayClient{rest: a.rest, log: a.log, token: cfg.Token,
		state: &resumeState{store: &stateStore{path: cfg.StatePath}, log: a.log, identifyBase: a.cfg.IdentifyBackoff}, onReady: func(user, app string) { // from READY
			a.in.setMe(user)
			a.app.learn(app)
		}}
	a.feeder = &feeder{seen: newRecent(4096), in: a.in, ix: a.ix, log: a.log, command: a.cfg.Command}
	return a, nil
}

// Health returns nil while the adapter can work, or why it stopped (a
// refused token, a refused intent).
func (a *Adapter) Health() error { return a.rest.refusedErr() }

// restClient makes REST calls: discordgo's session, Discord's rate windows,
// bounded retries, errors without secrets, and the stop after a refusal.
type restClient struct {
	s       *discordgo.Session
	log     *slog.Logger
	token   secret.Secret
	api     *url.URL // nil: the real Discord
	root    string   // APIRoot: where the calls go, named in errors
	limiter *limiter

	mu      sync.Mutex
	refused error // set once the token or an intent was refused: the adapter is stopped
	told    bool  // the refusal was logged
}

// refuse stops the adapter for good with err and logs it once.
func (r *restClient) refuse(err error) error {
	r.mu.Lock()
	if r.refused == nil {
		r.refused = err
	}
	err = r.refused
	first := !r.told
	r.told = true
	r.mu.Unlock()
	if first {
		r.log.Error("discord: adapter stopped; pibot and its other adapters keep running", "cause", err.Error())
	}
	return err
}

// refusedErr returns the refusal, if any.
func (r *restClient) refusedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}
