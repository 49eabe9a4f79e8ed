// Package slacktest is a fake Slack for tests: a Web API on 127.0.0.1
// (every method pibot's adapter calls, unknown_method for the rest, token
// checks per token kind, form and JSON bodies, a per-method tier rate model
// answering 429 + Retry-After, fault injection and a record of every
// call), a Socket Mode websocket (hello, envelopes, acks, disconnect,
// redelivery of unacknowledged envelopes), response URLs, file upload and
// download, and builders of the payloads Slack sends (messages with their
// app_mention twin, slash commands, button presses), signed for HTTP
// delivery.
package slacktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Call is one recorded Web API request.
type Call struct {
	Method string
	// Params holds every field: form values as sent, JSON strings
	// unquoted, other JSON values as raw JSON text.
	Params map[string]string
	// Code is the HTTP status answered; Error is Slack's error code ("" for
	// ok).
	Code  int
	Error string
	Time  time.Time
}

// FaultKind says how an injected fault fails a call.
type FaultKind int

// Fault kinds.
const (
	Fault429   FaultKind = iota // HTTP 429 with Retry-After
	Fault5xx                    // HTTP 503 with an HTML body
	FaultError                  // HTTP 200 {"ok":false,"error":Error}
)

// Fault is an injected failure.
type Fault struct {
	Kind       FaultKind
	RetryAfter int    // seconds, for Fault429 (default 1)
	Error      string // for FaultError, e.g. "missing_scope"
	Needed     string // the needed scope of a missing_scope error
}

// Message is a message as Slack shows it.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the thread it is in ("" at top level)
	User     string // the author: a user id, or the bot's user id
	Text     string // text (mrkdwn) or the streamed markdown
	Blocks   json.RawMessage
	// Buttons are the action ids of the message's buttons, in order.
	Buttons []string
	Edits   int
	Deleted bool
	// Stream is set on a message made by chat.startStream.
	Stream *Stream
	Files  []string // names of shared files
	Reacts []string
}

// Stream is the native stream state of a message.
type Stream struct {
	RecipientUser string
	RecipientTeam string
	Appends       int
	Stopped       bool
}

// Ephemeral is a message only one user sees.
type Ephemeral struct {
	Channel, ThreadTS, User, Text string
	// Via is "chat.postEphemeral" or "response_url".
	Via string
}

// Status is one assistant.threads.setStatus call.
type Status struct{ Channel, ThreadTS, Status string }

// Server is a fake Slack. Create it with New; it is safe for concurrent
// use.
type Server struct {
	// URL is the server's base; APIURL (URL + "/api/") goes to
	// adapters.slack.api_url.
	URL, APIURL string
	// Tokens the server accepts, and the signing secret of its HTTP
	// deliveries.
	BotToken, AppToken, SigningSecret string
	// The workspace and the bot's own ids.
	TeamID, BotUserID, BotID string

	srv *httptest.Server
	mux *http.ServeMux

	mu          sync.Mutex
	calls       []Call
	faults      map[string][]Fault
	msgs        map[string][]*Message // by channel, in order
	clock       int64                 // last ts, in microseconds
	ephemerals  []Ephemeral
	statuses    []Status
	files       map[string][]byte // file id → content
	fileNames   map[string]string
	nextID      int
	responses   map[string]*response
	noAssistant bool
	rate        *rateModel
	violations  []string
	sock        *socketState
}

type response struct {
	channel, user, thread string
	uses                  int
}

// Option configures a Server.
type Option func(*Server)

// WithoutAssistant makes assistant.threads.setStatus answer missing_scope,
// as for an app without assistant:write.
func WithoutAssistant() Option { return func(s *Server) { s.noAssistant = true } }

// WithLimits replaces the rate model's per-minute limits per method.
func WithLimits(perMin map[string]float64) Option {
	return func(s *Server) { s.rate = newRateModel(perMin) }
}

// New starts a fake Slack on 127.0.0.1. Close it when done.
func New(opts ...Option) *Server {
	s := &Server{
		BotToken: "xoxb-1-fake-bot-token", AppToken: "xapp-1-fake-app-token", SigningSecret: "fake-signing-secret",
		TeamID: "T0001", BotUserID: "UBOT", BotID: "BBOT",
		faults: map[string][]Fault{}, msgs: map[string][]*Message{}, files: map[string][]byte{},
		fileNames: map[string]string{}, responses: map[string]*response{},
		rate: newRateModel(nil), clock: 1700000000 * 1000000,
	}
	s.sock = newSocketState(s)
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/ws", s.websocket)
	mux.HandleFunc("/upload/", s.upload)
	mux.HandleFunc("/files/", s.download)
	mux.HandleFunc("/response/", s.respond)
	s.mux = mux
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	s.APIURL = s.srv.URL + "/api/"
	return s
}

// Close stops the server and its websockets.
func (s *Server) Close() {
	s.sock.closeAll()
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

// Calls returns the recorded Web API calls, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsOf returns the recorded calls of method.
func (s *Server) CallsOf(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Violations lists calls made inside a Retry-After window the server had
// announced for their method.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Messages returns the visible messages of channel (deleted ones are
// left out), oldest first; copies.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[channel] {
		if !m.Deleted {
			c := *m
			if m.Stream != nil {
				st := *m.Stream
				c.Stream = &st
			}
			out = append(out, c)
		}
	}
	return out
}

// Thread returns the visible messages of a thread: its parent and its
// replies.
func (s *Server) Thread(channel, threadTS string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.TS == threadTS || m.ThreadTS == threadTS {
			out = append(out, m)
		}
	}
	return out
}

// Ephemerals returns the ephemeral messages shown so far.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// Statuses returns the assistant status calls so far.
func (s *Server) Statuses() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Status(nil), s.statuses...)
}

// File returns the content of an uploaded file by name.
func (s *Server) File(name string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, n := range s.fileNames {
		if n == name {
			return s.files[id], true
		}
	}
	return nil, false
}

// nextTS returns a new, increasing ts. The caller holds s.mu.
func (s *Server) nextTS() string {
	now := time.Now().UnixMicro()
	if now <= s.clock {
		now = s.clock + 1
	}
	s.clock = now
	return strconv.FormatInt(now/1000000, 10) + "." + fmt.Sprintf("%06d", now%1000000)
}

// find returns the message ts of channel. The caller holds s.mu.
func (s *Server) find(channel, ts string) *Message {
	for _, m := range s.msgs[channel] {
		if m.TS == ts && !m.Deleted {
			return m
		}
	}
	return nil
}

// id returns a new id with prefix. The caller holds s.mu.
func (s *Server) id(prefix string) string {
	s.nextID++
	return prefix + strconv.Itoa(s.nextID)
}

// buttonsOf lists the action ids of the buttons in blocks.
func buttonsOf(blocks string) []string {
	var bs []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
		} `json:"elements"`
	}
	if json.Unmarshal([]byte(blocks), &bs) != nil {
		return nil
	}
	var out []string
	for _, b := range bs {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, e.ActionID)
			}
		}
	}
	return out
}

// textOf is what a message shows: its text, or the text of its section
// blocks.
func textOf(text, blocks string) string {
	if text != "" {
		return text
	}
	var bs []struct {
		Type string `json:"type"`
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	}
	_ = json.Unmarshal([]byte(blocks), &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "section" {
			parts = append(parts, b.Text.Text)
		}
	}
	return strings.Join(parts, "\n")
}
