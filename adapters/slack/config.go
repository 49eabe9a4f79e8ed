package slack

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

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

// Mode returns "socket" or "http".
func (a *Adapter) Mode() string { return a.cfg.Mode }
