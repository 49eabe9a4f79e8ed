// Package discordtest is a fake Discord for tests: a REST API under
// /api/v10 (the routes pibot's adapter uses, 404 JSON for the rest) with
// bot-token checks, route buckets that answer with X-RateLimit-* headers, a
// global limit, 429 bodies and 5xx answers on demand, multipart bodies with
// payload_json; and a gateway websocket (hello, heartbeat ACK,
// identify/resume, READY, dispatches with sequence numbers, invalid
// session, close codes such as 4004 and 4014). Clients reach it through a
// transport that rewrites https://discord.com to its URL, as pibot's
// adapters.discord.api_url does.
package discordtest

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

// Call is one recorded REST request.
type Call struct {
	Method string
	// Route is the path under /api/v10 with ids kept, e.g.
	// "/channels/10/messages".
	Route string
	// Body is the JSON body (payload_json for multipart requests).
	Body json.RawMessage
	// Files holds uploaded files by name.
	Files map[string][]byte
	// Status is the HTTP status answered.
	Status int
	Time   time.Time
}

// FaultKind says how an injected fault fails a call.
type FaultKind int

// Fault kinds.
const (
	Fault429 FaultKind = iota // 429 with a JSON body, Retry-After and X-RateLimit-* headers
	Fault5xx                  // 502 with an HTML body, as a proxy would
	// Fault429Header is a 429 whose body is not JSON: only the
	// Retry-After header says how long to wait.
	Fault429Header
)

// Fault is an injected failure of the next calls matching a route.
type Fault struct {
	Kind       FaultKind
	RetryAfter time.Duration // Fault429*: default 1 s
	Global     bool          // Fault429: a global limit
}

// Message is a message as the fake stores it.
type Message struct {
	ID         string          `json:"id"`
	ChannelID  string          `json:"channel_id"`
	GuildID    string          `json:"guild_id,omitempty"`
	Content    string          `json:"content"`
	Author     User            `json:"author"`
	Flags      int             `json:"flags"`
	Components json.RawMessage `json:"components"`
	Reference  *Reference      `json:"message_reference,omitempty"`
	// AllowedMentions is the allowed_mentions the client sent.
	AllowedMentions json.RawMessage   `json:"-"`
	Attachments     []Attachment      `json:"attachments"`
	Reactions       []string          `json:"-"`
	Edits           []time.Time       `json:"-"`
	Files           map[string][]byte `json:"-"`
	// Ephemeral is the id of the one user who sees an ephemeral
	// interaction answer; "" for normal messages.
	Ephemeral string `json:"-"`
	Timestamp string `json:"timestamp"`
	// Member is the author's guild membership, as a guild message's
	// MESSAGE_CREATE carries it (nil: none sent).
	Member *Member `json:"member,omitempty"`
}

// Member is the partial guild member of a message's author.
type Member struct {
	Roles []string `json:"roles"`
}

// Reference is a message_reference.
type Reference struct {
	MessageID string `json:"message_id"`
	ChannelID string `json:"channel_id,omitempty"`
}

// Attachment is a file on a message.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type,omitempty"`
	Size        int    `json:"size"`
	URL         string `json:"url"`
	ProxyURL    string `json:"proxy_url"`
}

// User is a Discord user.
type User struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	Bot      bool   `json:"bot,omitempty"`
}

// Channel is a channel or thread.
type Channel struct {
	ID       string `json:"id"`
	Type     int    `json:"type"`
	GuildID  string `json:"guild_id,omitempty"`
	ParentID string `json:"parent_id,omitempty"`
	OwnerID  string `json:"owner_id,omitempty"`
	Name     string `json:"name,omitempty"`
	// AutoArchive is the thread's auto_archive_duration.
	AutoArchive int `json:"auto_archive_duration,omitempty"`
}

// Channel types.
const (
	ChannelText   = 0
	ChannelDM     = 1
	ChannelForum  = 15
	ChannelThread = 11 // public thread
)

// Callback is one recorded interaction callback.
type Callback struct {
	InteractionID string
	Type          int
	Data          json.RawMessage
	Time          time.Time
}

// Server is a fake Discord. Create it with New; it is safe for concurrent
// use.
type Server struct {
	// URL is the base URL that replaces https://discord.com.
	URL string
	// Token is the bot token the server accepts (without "Bot ").
	Token string
	// Bot is the bot's own user; its id is the application id too.
	Bot User
	// Limits is the rate model; change it before the first call.
	Limits Limits

	srv *httptest.Server

	mu           sync.Mutex
	calls        []Call
	faults       map[string][]Fault
	channels     map[string]*Channel
	msgs         map[string][]*Message
	byID         map[string]*Message
	typing       map[string]int
	commands     map[string]json.RawMessage // scope ("global" or guild id) -> body
	callbacks    []Callback
	interactions map[string]*interaction // by token
	nextID       int64
	buckets      map[string]*bucket
	globalUntil  time.Time
	violations   []string
	cdn          map[string][]byte
	gw           *gateway
}

type interaction struct {
	id, token, channel, user string
	original                 string // message id of @original, "" until answered
	msg                      string // the message a pressed button was on
	created                  time.Time
	acked, expired           bool
}

// New starts a fake Discord for token (the bot token without "Bot ") on
// 127.0.0.1. Close it when done.
func New(token string) *Server {
	s := &Server{
		Token:        token,
		Bot:          User{ID: "900000000000000001", Username: "pibot", Bot: true},
		Limits:       DefaultLimits(),
		faults:       map[string][]Fault{},
		channels:     map[string]*Channel{},
		msgs:         map[string][]*Message{},
		byID:         map[string]*Message{},
		typing:       map[string]int{},
		commands:     map[string]json.RawMessage{},
		interactions: map[string]*interaction{},
		nextID:       1200000000000000000,
		buckets:      map[string]*bucket{},
		cdn:          map[string][]byte{},
	}
	s.gw = newGateway(s)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v10/", s.serveREST)
	mux.HandleFunc("/gateway", s.gw.serve)
	mux.HandleFunc("/gateway/", s.gw.serve) // discordgo adds a trailing slash to the URL
	mux.HandleFunc("/cdn/", s.serveCDN)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the server and ends every gateway connection.
func (s *Server) Close() {
	s.gw.closeAll()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// newID returns a fresh snowflake.
func (s *Server) newIDLocked() string {
	s.nextID++
	return strconv.FormatInt(s.nextID, 10)
}

// NewID returns a fresh snowflake for ids a test makes up.
func (s *Server) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newIDLocked()
}

// AddChannel adds a channel: a guild text channel (guild != ""), a forum
// (ChannelForum) or a DM (guild "", typ ChannelDM).
func (s *Server) AddChannel(id, guild string, typ int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[id] = &Channel{ID: id, GuildID: guild, Type: typ, Name: "chan-" + id}
}

// AddThread adds a thread that someone else (owner) started in parent.
func (s *Server) AddThread(id, parent, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.channels[parent]
	guild := ""
	if p != nil {
		guild = p.GuildID
	}
	s.channels[id] = &Channel{ID: id, GuildID: guild, Type: ChannelThread, ParentID: parent, OwnerID: owner, Name: "thread", AutoArchive: 1440}
}

// Channel returns a copy of the channel id.
func (s *Server) Channel(id string) (Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[id]
	if !ok {
		return Channel{}, false
	}
	return *c, true
}

// PostUser stores a message of user in channel (as Discord would before
// dispatching it) and returns it; reply names the message it replies to.
func (s *Server) PostUser(channel string, u User, content, reply string) *Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{ID: s.newIDLocked(), ChannelID: channel, Content: content, Author: u, Timestamp: time.Now().UTC().Format(time.RFC3339)}
	if c := s.channels[channel]; c != nil {
		m.GuildID = c.GuildID
	}
	if reply != "" {
		m.Reference = &Reference{MessageID: reply, ChannelID: channel}
	}
	s.storeLocked(m)
	return m
}

// PostMember is PostUser for a guild member with roles: its
// MESSAGE_CREATE carries them.
func (s *Server) PostMember(channel string, u User, roles []string, content string) *Message {
	m := s.PostUser(channel, u, content, "")
	s.mu.Lock()
	defer s.mu.Unlock()
	m.Member = &Member{Roles: append([]string{}, roles...)}
	return m
}

// AddFile serves data at a CDN URL and returns an attachment for it.
func (s *Server) AddFile(name, contentType string, data []byte) Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.newIDLocked()
	s.cdn[id] = data
	u := s.URL + "/cdn/attachments/" + id + "/" + name
	return Attachment{ID: id, Filename: name, ContentType: contentType, Size: len(data), URL: u, ProxyURL: u}
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/cdn/attachments/"), "/")
	s.mu.Lock()
	data, ok := s.cdn[parts[0]]
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "" {
		s.violate("a CDN download carried an Authorization header")
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, _ = w.Write(data)
}

func (s *Server) storeLocked(m *Message) {
	s.msgs[m.ChannelID] = append(s.msgs[m.ChannelID], m)
	s.byID[m.ID] = m
}

// Messages returns copies of the messages visible in channel (a thread's
// id for a thread), oldest first, ephemeral ones included.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.msgs[channel] {
		out = append(out, *m)
	}
	return out
}

// Message returns a copy of the message id.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.byID[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// Calls returns every recorded REST request.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Callbacks returns every interaction callback.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// Commands returns the application commands last registered for scope
// ("global" or a guild id) as JSON, nil if none.
func (s *Server) Commands(scope string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands[scope]
}

// Typing returns how many typing indicators channel got.
func (s *Server) Typing(channel string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.typing[channel]
}

// Fail makes the next n calls whose "METHOD route-pattern" matches key fail
// with f. Keys: "POST messages", "PATCH message", "DELETE message",
// "POST typing", "POST callback", "PATCH webhook", "POST webhook",
// "POST threads", "PUT commands", "GET gateway", "PUT reaction",
// "GET channel".
func (s *Server) Fail(key string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.faults[key] = append(s.faults[key], f)
	}
}

// Violations lists the client's breaches of Discord's rules that the fake
// noticed: calls inside a 429 window, calls without the bot token, a
// token sent where it does not belong.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

func (s *Server) violate(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError writes Discord's error body.
func apiError(w http.ResponseWriter, status, code int, msg string) {
	writeJSON(w, status, map[string]any{"message": msg, "code": code})
}
