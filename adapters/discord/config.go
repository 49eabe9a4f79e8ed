package discord

import (
	"fmt"
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

// Health returns nil while the adapter can work, or why it stopped (a
// refused token, a refused intent).
func (a *Adapter) Health() error { return a.calls.refusedErr() }

// caller makes REST calls: discordgo's session, Discord's rate windows,
// bounded retries, errors without secrets, and the stop after a refusal.
type caller struct {
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
func (r *caller) refuse(err error) error {
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
func (r *caller) refusedErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}
