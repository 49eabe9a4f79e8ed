package telegram

import (
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/go-telegram/bot/models"
)

const secretHeader = "X-Telegram-Bot-Api-Secret-Token"

// maxUpdateBytes bounds a webhook body.
const maxUpdateBytes = 1 << 20

// WebhookPath returns the unguessable path (derived from the webhook
// secret) where the server must mount WebhookHandler; "" in polling mode.
func (a *Adapter) WebhookPath() string { return a.whPath }

func (a *Adapter) webhookURL() string {
	return strings.TrimRight(a.cfg.WebhookURL, "/") + a.whPath
}

// WebhookHandler serves Telegram's webhook deliveries. A request without
// the right secret token gets 403 before its body is read (constant-time
// compare); an update is answered 200 only after the sink returned nil for
// it, and 500 otherwise so that Telegram sends it again. Before Run has
// registered the webhook it answers 503.
func (a *Adapter) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.whPath == "" {
			http.Error(w, "telegram webhook mode is off", http.StatusNotFound)
			return
		}
		got := r.Header.Get(secretHeader)
		if subtle.ConstantTimeCompare([]byte(got), []byte(a.whSecret.Reveal())) != 1 {
			a.log.Warn("telegram: webhook request with a wrong or missing secret token", "remote", r.RemoteAddr)
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		a.mu.Lock()
		sink := a.sink
		a.mu.Unlock()
		if sink == nil {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxUpdateBytes))
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		var u models.Update
		if err := json.Unmarshal(body, &u); err != nil {
			a.log.Warn("telegram: webhook body is not an update", "err", err)
			http.Error(w, "bad update", http.StatusBadRequest)
			return
		}
		if err := a.feed(r.Context(), sink, &u); err != nil {
			a.log.Warn("telegram: update not taken; Telegram will deliver it again", "update_id", u.ID, "err", err)
			http.Error(w, "not stored", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}
