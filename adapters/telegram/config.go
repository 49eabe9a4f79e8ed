package telegram

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
	Rates tokenbucket.Rates
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

// DefaultAPIURL is the public Bot API server.
const DefaultAPIURL = "https://api.telegram.org"

// APIRoot is the root every Bot API call of the adapter goes to
// (ROOT/bot<token>/METHOD), resolved from adapters.telegram.api_url:
// DefaultAPIURL when empty, without a trailing slash. `pibot doctor`
// checks the token at the same root.
func APIRoot(apiURL string) (string, error) {
	if apiURL == "" {
		return DefaultAPIURL, nil
	}
	if u, err := url.Parse(apiURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("telegram: adapters.telegram.api_url %q is not an http(s) URL", apiURL)
	}
	return strings.TrimRight(apiURL, "/"), nil
}
