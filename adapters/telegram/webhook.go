package telegram

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxUpdateBytes bounds a webhook body.
const maxUpdateBytes = 1 << 20

// webhook receives updates by webhook: it registers pibot's URL with
// Telegram (run) and serves the deliveries (ServeHTTP). In polling mode it
// has no path and answers every request 404.
type webhook struct {
	secret  secret.Secret
	path    string // "/telegram/<hash of the secret>"; "" in polling mode
	url     string // public URL: Config.WebhookURL + path
	allowed []string
	calls   *caller
	reader  *reader
	log     *slog.Logger

	mu   sync.Mutex
	sink chat.Sink // nil until run registered the webhook
}

// newWebhook validates cfg's webhook settings and derives the path; in
// polling mode it returns a webhook without a path.
func newWebhook(cfg Config) (*webhook, error) {
	if cfg.Mode != ModeWebhook {
		return &webhook{}, nil
	}
	if cfg.WebhookURL == "" {
		return nil, errors.New("telegram: adapters.telegram.webhook_url is required in webhook mode (the public https base URL of pibot)")
	}
	if u, err := url.Parse(cfg.WebhookURL); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("telegram: adapters.telegram.webhook_url %q is not an http(s) URL", cfg.WebhookURL)
	}
	w := &webhook{secret: cfg.WebhookSecret, allowed: cfg.AllowedUpdates}
	if w.secret.IsZero() {
		var b [32]byte
		_, _ = rand.Read(b[:])
		w.secret = secret.New(hex.EncodeToString(b[:]))
	}
	if !validSecretToken(w.secret.Reveal()) {
		return nil, errors.New("telegram: adapters.telegram.webhook_secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
	}
	sum := sha256.Sum256([]byte("pibot telegram webhook path\x00" + w.secret.Reveal()))
	w.path = "/telegram/" + hex.EncodeToString(sum[:16])
	w.url = strings.TrimRight(cfg.WebhookURL, "/") + w.path
	return w, nil
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

// run registers the webhook and serves deliveries until ctx ends.
func (w *webhook) run(ctx context.Context, sink chat.Sink) error {
	err := w.calls.do(ctx, modeAdmin, 0, "setWebhook", func(ctx context.Context) error {
		_, err := w.calls.bot.SetWebhook(ctx, &bot.SetWebhookParams{URL: w.url, SecretToken: w.secret.Reveal(), AllowedUpdates: w.allowed})
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	w.mu.Lock()
	w.sink = sink
	w.mu.Unlock()
	w.log.Info("telegram: webhook set", "path", w.path)
	<-ctx.Done()
	w.mu.Lock()
	w.sink = nil
	w.mu.Unlock()
	return nil
}

// ServeHTTP serves one delivery (see Adapter.WebhookHandler).
func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if w.path == "" {
		http.Error(rw, "telegram webhook mode is off", http.StatusNotFound)
		return
	}
	got := r.Header.Get(secretHeader)
	if subtle.ConstantTimeCompare([]byte(got), []byte(w.secret.Reveal())) != 1 {
		w.log.Warn("telegram: webhook request with a wrong or missing secret token", "remote", r.RemoteAddr)
		http.Error(rw, "forbidden", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodPost {
		http.Error(rw, "POST only", http.StatusMethodNotAllowed)
		return
	}
	w.mu.Lock()
	sink := w.sink
	w.mu.Unlock()
	if sink == nil {
		http.Error(rw, "not ready", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxUpdateBytes))
	if err != nil {
		http.Error(rw, "bad body", http.StatusBadRequest)
		return
	}
	var u models.Update
	if err := json.Unmarshal(body, &u); err != nil {
		w.log.Warn("telegram: webhook body is not an update", "err", err)
		http.Error(rw, "bad update", http.StatusBadRequest)
		return
	}
	if err := w.reader.feed(r.Context(), sink, &u); err != nil {
		w.log.Log(r.Context(), chat.RefusedLevel(err), "telegram: update not taken; Telegram will deliver it again", "update_id", u.ID, "err", err)
		http.Error(rw, "not stored", http.StatusInternalServerError)
		return
	}
	rw.WriteHeader(http.StatusOK)
}
