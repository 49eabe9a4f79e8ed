package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

//go:embed assets
var assetFS embed.FS

// tokenCookie carries the token after a visit to /?token=….
const tokenCookie = "pibot_web_token"

// api is the browser side of the web chat: the UI's files and the JSON +
// Server-Sent Events API, behind the token and Host checks. Inbound
// messages and presses go to feeder; the conversation logs in store feed
// the event streams.
type api struct {
	static  fs.FS
	token   secret.Secret
	log     *slog.Logger
	store   *convStore
	relay   *relay
	feeder  *feeder
	history *historyAPI
	notice  string // Config.Notice
	health  health // what the header shows beside "connected"
}

// handler returns the HTTP handler (see Adapter.Handler).
func (a *api) handler() http.Handler {
	static := a.static
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, static, "index.html")
	})
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("POST /api/send", a.handleSend)
	mux.HandleFunc("POST /api/action", a.handleAction)
	mux.HandleFunc("GET /api/events", a.handleEvents)
	mux.HandleFunc("GET /api/history", a.history.handleHistory)
	mux.HandleFunc("GET /api/conversations", a.history.handleConversations)
	mux.HandleFunc("GET /api/info", a.handleInfo)
	return a.guard(newFailures(), http.NewCrossOriginProtection().Handler(mux))
}

// guard sets security headers and checks the Host and the token; wrong
// tokens are counted in fails, per client address.
func (a *api) guard(fails *failures, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if a.token.IsZero() {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !isLoopbackHost(host) {
				http.Error(w, "web chat: only loopback host names are served without a token", http.StatusMisdirectedRequest)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		client, now := clientKey(r), time.Now()
		if d := fails.locked(client, now); d > 0 {
			tooMany(w, d)
			return
		}
		// wrong reports a wrong token; a missing one is no guess and is
		// not counted.
		wrong := func(got, msg string) {
			if got != "" {
				if d := fails.fail(client, now); d > 0 {
					a.log.Warn("web chat: wrong tokens, client locked out", "client", client, "for", d)
					tooMany(w, d)
					return
				}
			}
			http.Error(w, msg, http.StatusUnauthorized)
		}
		if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
			if !a.tokenOK(q) {
				wrong(q, "web chat: bad token")
				return
			}
			fails.ok(client)
			http.SetCookie(w, &http.Cookie{
				Name: tokenCookie, Value: q, Path: "/", HttpOnly: true,
				Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
			})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		if got := requestToken(r); !a.tokenOK(got) {
			wrong(got, "web chat: token required (open /?token=… once, or send Authorization: Bearer …)")
			return
		}
		fails.ok(client)
		next.ServeHTTP(w, r)
	})
}

func requestToken(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, tok, _ := strings.Cut(auth, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		return c.Value
	}
	return ""
}

// tokenOK compares in constant time (hashes hide the length).
func (a *api) tokenOK(got string) bool {
	if got == "" {
		return false
	}
	g := sha256.Sum256([]byte(got))
	w := sha256.Sum256([]byte(a.token.Reveal()))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// sendRequest is the body of POST /api/send.
type sendRequest struct {
	Conv   string `json:"conv"`
	Thread string `json:"thread"`
	// ID is chosen by the browser so that a retry is recognised.
	ID      string   `json:"id"`
	Text    string   `json:"text"`
	ReplyTo *wireRef `json:"replyTo"`
	// Quiet marks a command sent by a control of the page (the Tree and
	// Stop buttons): it must be a command, and it is not posted in the
	// conversation as a message of the user.
	Quiet bool `json:"quiet"`
}

// actionRequest is the body of POST /api/action.
type actionRequest struct {
	Conv string `json:"conv"`
	// Msg is the message that carried the button.
	Msg  string `json:"msg"`
	Data string `json:"data"`
	// ID is chosen by the browser so that a retry is recognised.
	ID string `json:"id"`
}

func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		return errors.New("content type must be application/json")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxInboundText+4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

func (a *api) handleSend(w http.ResponseWriter, r *http.Request) {
	var req sendRequest
	if err := decodeJSON(w, r, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case !validID(req.Conv):
		http.Error(w, "bad conversation id", http.StatusBadRequest)
		return
	case req.Thread != "" && !validID(req.Thread):
		http.Error(w, "bad thread id", http.StatusBadRequest)
		return
	case !validID(req.ID):
		http.Error(w, "bad message id", http.StatusBadRequest)
		return
	case strings.TrimSpace(req.Text) == "":
		http.Error(w, "empty message", http.StatusBadRequest)
		return
	case len(req.Text) > maxInboundText:
		http.Error(w, fmt.Sprintf("message longer than %d bytes", maxInboundText), http.StatusRequestEntityTooLarge)
		return
	case req.ReplyTo != nil && (!validID(req.ReplyTo.ID) || req.ReplyTo.Thread != "" && !validID(req.ReplyTo.Thread)):
		http.Error(w, "bad replyTo", http.StatusBadRequest)
		return
	case req.Quiet && (req.ReplyTo != nil || chat.ParseCommand(req.Text, "") == nil):
		http.Error(w, "a quiet message must be a command", http.StatusBadRequest)
		return
	}
	conv := chat.ConvRef{Platform: Platform, Channel: req.Conv, Thread: req.Thread, DM: true}
	in := chat.Inbound{
		Kind:      chat.KindMessage,
		Conv:      conv,
		Msg:       chat.MsgRef{Conv: conv, ID: "u-" + req.ID},
		User:      localUser(),
		Text:      req.Text,
		Mentioned: true,
		Command:   chat.ParseCommand(req.Text, ""),
		DedupKey:  "web:" + req.Conv + ":u-" + req.ID,
		Time:      time.Now().UTC(),
	}
	if req.ReplyTo != nil {
		rc := conv
		rc.Thread = req.ReplyTo.Thread
		in.ReplyTo = &chat.MsgRef{Conv: rc, ID: req.ReplyTo.ID}
	}

	if req.Quiet {
		a.sendQuiet(w, r, in)
		return
	}

	a.store.mu.Lock()
	l := a.store.conv(req.Conv)
	msg := l.msgs[in.Msg.ID]
	if msg == nil {
		msg = &message{ID: in.Msg.ID, Thread: req.Thread, From: fromUser, Text: req.Text, ReplyTo: req.ReplyTo, Time: in.Time}
		l.add(msg)
		a.relay.messageLocked(req.Conv, msg)
	}
	if req.ReplyTo != nil {
		if to := l.msgs[req.ReplyTo.ID]; to != nil {
			in.ReplyToBot = to.From == fromBot
		}
	}
	a.store.mu.Unlock()

	err := a.feeder.feed(r.Context(), in)

	a.store.mu.Lock()
	errText, status := "", http.StatusOK
	if err != nil {
		errText, status = refusal(err)
	}
	if msg.Error != errText {
		msg.Error = errText
		l.update(msg)
		a.relay.messageLocked(req.Conv, msg)
	}
	a.store.mu.Unlock()
	if err != nil {
		a.logRefused(r.Context(), "web chat: message not accepted", req.Conv, err)
		http.Error(w, errText, status)
		return
	}
	writeJSON(w, map[string]string{"id": in.Msg.ID})
}

// logRefused logs an event the gateway did not take. The browser gets
// words (refusal); the details are here. An unavailable store is the
// gateway's to log, once per outage, so each refusal is a debug line.
func (a *api) logRefused(ctx context.Context, msg, conv string, err error) {
	a.log.Log(ctx, chat.RefusedLevel(err), msg, "conv", conv, "err", err)
}

func (a *api) handleAction(w http.ResponseWriter, r *http.Request) {
	var req actionRequest
	if err := decodeJSON(w, r, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !validID(req.Conv) || !validID(req.ID) || req.Msg == "" || req.Data == "" {
		http.Error(w, "conv, msg, data and id are required", http.StatusBadRequest)
		return
	}
	a.store.mu.Lock()
	var msg *message
	if l := a.store.convs[req.Conv]; l != nil {
		msg = l.msgs[req.Msg]
	}
	var thread string
	found := false
	if msg != nil {
		thread = msg.Thread
		for _, row := range msg.Buttons {
			for _, b := range row {
				found = found || b.ID == req.Data
			}
		}
	}
	a.store.mu.Unlock()
	if msg == nil {
		http.Error(w, "the message with this button is gone", http.StatusNotFound)
		return
	}
	if !found {
		http.Error(w, "the message has no such button (any more)", http.StatusConflict)
		return
	}
	conv := chat.ConvRef{Platform: Platform, Channel: req.Conv, Thread: thread, DM: true}
	ref := chat.MsgRef{Conv: conv, ID: req.Msg}
	in := chat.Inbound{
		Kind:        chat.KindAction,
		Conv:        conv,
		Msg:         ref,
		User:        localUser(),
		Mentioned:   true,
		Action:      &chat.Action{Data: req.Data, Msg: ref},
		Interaction: &chat.Interaction{Platform: Platform, ID: req.ID, Conv: conv, Msg: ref, User: UserID},
		DedupKey:    "web:" + req.Conv + ":a-" + req.ID,
		Time:        time.Now().UTC(),
	}
	if err := a.feeder.feed(r.Context(), in); err != nil {
		a.logRefused(r.Context(), "web chat: button press not accepted", req.Conv, err)
		words, status := refusal(err)
		http.Error(w, strings.Replace(words, "this message", "this button press", 1), status)
		return
	}
	writeJSON(w, map[string]string{"ok": "true"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sendQuiet feeds a command of a page control, which the conversation
// log does not show.
func (a *api) sendQuiet(w http.ResponseWriter, r *http.Request, in chat.Inbound) {
	if err := a.feeder.feed(r.Context(), in); err != nil {
		a.logRefused(r.Context(), "web chat: command not accepted", in.Conv.Channel, err)
		words, status := refusal(err)
		http.Error(w, strings.Replace(words, "this message", "this command", 1), status)
		return
	}
	writeJSON(w, map[string]string{"id": in.Msg.ID})
}

// handleInfo answers what the page shows besides conversations: the
// notice of an empty conversation.
func (a *api) handleInfo(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(struct {
		Notice string `json:"notice"`
		// Health is what the header shows beside "connected" ("": nothing).
		Health string `json:"health"`
	}{a.notice, a.health.get()})
}
