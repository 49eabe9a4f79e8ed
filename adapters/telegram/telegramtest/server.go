// Package telegramtest is a fake Telegram Bot API for tests. It serves
// /bot<token>/<method> on 127.0.0.1 with the JSON and multipart bodies that
// go-telegram/bot sends, long polling with offset semantics and 409s on
// overlapping polls (and a count of polls held at once), webhook delivery
// retried until a 2xx (WithWebhookDelivery), a per-chat and global rate model that answers 429 with
// retry_after, Telegram's 400s ("message is not modified", "can't parse
// entities"), fault injection, update injection and a record of every call.
package telegramtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot/models"
)

// Call is one recorded Bot API request.
type Call struct {
	Method string
	// Params holds every field: JSON strings unquoted, other JSON values
	// as raw JSON text, multipart fields as sent.
	Params map[string]string
	// Files holds uploaded multipart files by field name.
	Files map[string][]byte
	// Code is the error_code answered (200 for success, 0 for a dropped
	// connection).
	Code int
	Time time.Time
}

// FaultKind says how an injected fault fails a call.
type FaultKind int

// Fault kinds.
const (
	Fault5xx   FaultKind = iota // HTTP 502 with an HTML body, as a proxy would
	Fault429                    // a 429 with RetryAfter seconds
	FaultClose                  // the connection is closed without an answer
	Fault400                    // a 400 Bad Request with Description
)

// Fault is an injected failure.
type Fault struct {
	Kind       FaultKind
	RetryAfter int // seconds, for Fault429 (default 1)
	// Description is the error text for Fault400, e.g. "Bad Request:
	// can't parse entities: ...".
	Description string
}

// Server is a fake Bot API. Create it with New; it is safe for concurrent use.
type Server struct {
	// URL is the base URL to give the client (bot.WithServerURL, api_url).
	URL string
	// Token is the bot token the server accepts.
	Token string
	// Bot is the bot's own user, answered by getMe.
	Bot models.User

	srv *httptest.Server

	mu         sync.Mutex
	calls      []Call
	faults     map[string][]Fault
	chats      map[int64]models.Chat
	msgs       map[int64][]*Message
	nextMsg    map[int64]int
	drafts     map[int64][]string
	migrated   map[int64]int64
	files      map[string]fakeFile
	commands   []models.BotCommand
	webhookURL string
	webhookSec string
	nextQuery  int

	updates    []json.RawMessage
	updateIDs  []int64
	nextUpdate int64
	notify     chan struct{}
	pollStop   chan struct{} // closed to end the poll in flight with a 409
	conflict   bool

	rate       *rateModel
	violations []string

	polls, maxPolls int // getUpdates requests held now, and at most

	deliver      bool // WithWebhookDelivery
	deliverRetry time.Duration
	deliveries   []Delivery
	stopDeliver  context.CancelFunc
	deliverDone  chan struct{}
}

type fakeFile struct {
	path string
	data []byte
	size int64
}

// Option configures a Server.
type Option func(*Server)

// WithLimits replaces the default rate model.
func WithLimits(l Limits) Option { return func(s *Server) { s.rate = newRateModel(l) } }

// WithUsername sets the bot's username (default "pibot_test_bot").
func WithUsername(name string) Option { return func(s *Server) { s.Bot.Username = name } }

// New starts a fake Bot API for token on 127.0.0.1. Close it when done.
func New(token string, opts ...Option) *Server {
	id, _ := strconv.ParseInt(strings.SplitN(token, ":", 2)[0], 10, 64)
	s := &Server{
		Token:      token,
		Bot:        models.User{ID: id, IsBot: true, FirstName: "pibot", Username: "pibot_test_bot"},
		faults:     map[string][]Fault{},
		chats:      map[int64]models.Chat{},
		msgs:       map[int64][]*Message{},
		nextMsg:    map[int64]int{},
		drafts:     map[int64][]string{},
		migrated:   map[int64]int64{},
		files:      map[string]fakeFile{},
		notify:     make(chan struct{}),
		nextUpdate: 100,
		rate:       newRateModel(DefaultLimits()),
	}
	for _, o := range opts {
		o(s)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	if s.deliver {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopDeliver, s.deliverDone = cancel, make(chan struct{})
		go s.deliverLoop(ctx)
	}
	return s
}

// Close stops the server, ending held polls and webhook deliveries.
func (s *Server) Close() {
	if s.stopDeliver != nil {
		s.stopDeliver()
		<-s.deliverDone
	}
	s.mu.Lock()
	if s.pollStop != nil {
		close(s.pollStop)
		s.pollStop = nil
	}
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Fail makes the next n calls of method fail with f.
func (s *Server) Fail(method string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[method] = append(s.faults[method], f)
	}
}

// SetConflict makes every getUpdates answer 409, as when another process
// polls the same token.
func (s *Server) SetConflict(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflict = on
}

// Calls returns every call so far, optionally only those of the given
// methods.
func (s *Server) Calls(methods ...string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if len(methods) == 0 || contains(methods, c.Method) {
			out = append(out, c)
		}
	}
	return out
}

// Violations lists calls that arrived before a retry_after given earlier
// had expired.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Commands returns the last command list set with setMyCommands.
func (s *Server) Commands() []models.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]models.BotCommand(nil), s.commands...)
}

// Webhook returns the URL and secret token of the current webhook.
func (s *Server) Webhook() (url, secretToken string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.webhookURL, s.webhookSec
}

// Drafts returns the draft texts sent to a chat, in order.
func (s *Server) Drafts(chatID int64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.drafts[chatID]...)
}

// Migrate turns group chat from into supergroup to: later sends to from
// fail with migrate_to_chat_id.
func (s *Server) Migrate(from, to int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.migrated[from] = to
	s.chats[to] = models.Chat{ID: to, Type: models.ChatTypeSupergroup, Title: s.chats[from].Title}
}

// AddFile stores a file that getFile and /file/bot<token>/<path> serve and
// returns its file_id. size overrides the reported size when > 0.
func (s *Server) AddFile(name string, data []byte, size int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("file%d", len(s.files)+1)
	if size <= 0 {
		size = int64(len(data))
	}
	s.files[id] = fakeFile{path: "documents/" + id + "_" + name, data: data, size: size}
	return id
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// apiError is a Bot API error answer.
type apiError struct {
	code       int
	desc       string
	retryAfter int
	migrateTo  int64
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.Token+"/"); ok {
		s.serveFile(w, rest)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	tok, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || tok != s.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	params, files, err := parseParams(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + err.Error()})
		return
	}
	call := Call{Method: method, Params: params, Files: files, Time: time.Now()}

	s.mu.Lock()
	if f, ok := s.takeFault(method); ok {
		switch f.Kind {
		case FaultClose:
			call.Code = 0
			s.calls = append(s.calls, call)
			s.mu.Unlock()
			closeConn(w)
			return
		case Fault5xx:
			call.Code = http.StatusBadGateway
			s.calls = append(s.calls, call)
			s.mu.Unlock()
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
			return
		case Fault400:
			s.mu.Unlock()
			s.answer(w, call, nil, &apiError{code: 400, desc: f.Description})
			return
		case Fault429:
			ra := max(f.RetryAfter, 1)
			s.rate.penalise(chatOf(params), ra)
			s.mu.Unlock()
			s.answer(w, call, nil, &apiError{code: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", ra), retryAfter: ra})
			return
		}
	}
	s.mu.Unlock()

	if method == "getUpdates" {
		s.getUpdates(w, r, call)
		return
	}
	s.mu.Lock()
	result, aerr := s.dispatch(call)
	s.mu.Unlock()
	s.answer(w, call, result, aerr)
}

func (s *Server) takeFault(method string) (Fault, bool) {
	q := s.faults[method]
	if len(q) == 0 {
		return Fault{}, false
	}
	s.faults[method] = q[1:]
	return q[0], true
}

// answer records call and writes the Bot API answer.
func (s *Server) answer(w http.ResponseWriter, call Call, result any, e *apiError) {
	s.mu.Lock()
	if e != nil {
		call.Code = e.code
	} else {
		call.Code = 200
	}
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if e != nil {
		body := map[string]any{"ok": false, "error_code": e.code, "description": e.desc}
		p := map[string]any{}
		if e.retryAfter > 0 {
			p["retry_after"] = e.retryAfter
		}
		if e.migrateTo != 0 {
			p["migrate_to_chat_id"] = e.migrateTo
		}
		if len(p) > 0 {
			body["parameters"] = p
		}
		writeJSON(w, e.code, body)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func closeConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("telegramtest: response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// parseParams reads a JSON, urlencoded or multipart body into fields.
func parseParams(r *http.Request) (map[string]string, map[string][]byte, error) {
	params := map[string]string{}
	for k, v := range r.URL.Query() {
		params[k] = v[0]
	}
	ct, mp, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var m map[string]json.RawMessage
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, nil, err
		}
		if len(body) == 0 {
			return params, nil, nil
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, nil, fmt.Errorf("bad JSON body: %w", err)
		}
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				params[k] = str
			} else {
				params[k] = string(v)
			}
		}
		return params, nil, nil
	case "multipart/form-data":
		files := map[string][]byte{}
		mr := multipart.NewReader(r.Body, mp["boundary"])
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) { // also an empty body (no parameters)
				return params, files, nil
			}
			if err != nil {
				return nil, nil, fmt.Errorf("bad multipart body: %w", err)
			}
			b, err := io.ReadAll(p)
			if err != nil {
				return nil, nil, err
			}
			if p.FileName() != "" {
				files[p.FormName()] = b
				params[p.FormName()] = "file:" + p.FileName()
			} else {
				params[p.FormName()] = string(b)
			}
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, nil, err
		}
		for k, v := range r.PostForm {
			params[k] = v[0]
		}
		return params, nil, nil
	}
}

func (s *Server) serveFile(w http.ResponseWriter, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if f.path == path {
			_, _ = w.Write(f.data)
			return
		}
	}
	http.NotFound(w, nil)
}
