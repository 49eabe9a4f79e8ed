package slack

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
)

// maxEventBytes bounds a delivery's body.
const maxEventBytes = 1 << 20

// EventsHandler serves Slack's HTTP deliveries at EventsPath: Events API
// callbacks, slash commands and interactivity. The v0 signature over the
// raw body and the 5-minute timestamp window are checked before anything
// is parsed (401 otherwise, constant-time compare); url_verification is
// answered; a delivery is answered 200 only after the sink returned nil,
// and 500 otherwise so that Slack delivers it again. Retries
// (X-Slack-Retry-Num) go to the sink like the first delivery: its dedupe
// key absorbs them. A delivery that comes while Run is starting waits for
// it (up to 2 s, within Slack's 3); without a running Run, or in socket
// mode, it is answered 503.
func (a *Adapter) EventsHandler() http.Handler { return a.recv.handler() }

func (a *receiver) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		// The headers (signature form, timestamp window) are checked before
		// the body is read, the signature over the body before it is parsed.
		sv, err := a.verifier(r.Header)
		if err != nil {
			a.log.Warn("slack: HTTP delivery with a bad or stale signature refused", "remote", r.RemoteAddr)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEventBytes))
		if err != nil {
			http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		if _, err := sv.Write(body); err != nil || sv.Ensure() != nil {
			a.log.Warn("slack: HTTP delivery with a bad or stale signature refused", "remote", r.RemoteAddr)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		var kindName string
		var payload []byte
		switch ct {
		case "application/json":
			var o outerEvent
			if err := json.Unmarshal(body, &o); err != nil {
				http.Error(w, "bad JSON", http.StatusBadRequest)
				return
			}
			if o.Type == "url_verification" {
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, o.Challenge)
				return
			}
			kindName, payload = "events_api", body
		case "application/x-www-form-urlencoded":
			form, err := url.ParseQuery(string(body))
			if err != nil {
				http.Error(w, "bad form", http.StatusBadRequest)
				return
			}
			if p := form.Get("payload"); p != "" {
				kindName, payload = "interactive", []byte(p)
			} else {
				sc := slackapi.SlashCommand{TeamID: form.Get("team_id"), ChannelID: form.Get("channel_id"),
					ChannelName: form.Get("channel_name"), UserID: form.Get("user_id"), UserName: form.Get("user_name"),
					Command: form.Get("command"), Text: form.Get("text"), ResponseURL: form.Get("response_url"),
					TriggerID: form.Get("trigger_id"), APIAppID: form.Get("api_app_id")}
				payload, _ = json.Marshal(sc)
				kindName = "slash_commands"
			}
		default:
			http.Error(w, "unsupported content type", http.StatusUnsupportedMediaType)
			return
		}
		sink := a.currentSink(r)
		if sink == nil {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
			a.log.Debug("slack: redelivery", "retry", n, "reason", r.Header.Get("X-Slack-Retry-Reason"))
		}
		if err := a.deliver(r.Context(), sink, kindName, payload); err != nil {
			a.log.Log(r.Context(), chat.RefusedLevel(err), "slack: delivery not taken; Slack will deliver it again", "kind", kindName, "err", err)
			http.Error(w, "not stored", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// verifier checks that the request carries a v0 X-Slack-Signature and an
// X-Slack-Request-Timestamp within 5 minutes, and returns the verifier of
// its body (HMAC-SHA256 of "v0:ts:body" with the signing secret, compared
// in constant time by Ensure).
func (a *receiver) verifier(h http.Header) (slackapi.SecretsVerifier, error) {
	if a.cfg.SigningSecret.IsZero() || !strings.HasPrefix(h.Get("X-Slack-Signature"), "v0=") {
		return slackapi.SecretsVerifier{}, errors.New("no v0 signature")
	}
	return slackapi.NewSecretsVerifier(h, a.cfg.SigningSecret.Reveal())
}

// readyWait is how long a delivery waits for Run to start taking events.
const readyWait = 2 * time.Second

// currentSink returns the sink of the running Run, waiting up to readyWait
// for the first one.
func (a *receiver) currentSink(r *http.Request) chat.Sink {
	a.mu.Lock()
	sink := a.sink
	a.mu.Unlock()
	if sink != nil || a.cfg.Mode != ModeHTTP {
		return sink
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-a.ready:
	case <-t.C:
	case <-r.Context().Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sink
}
