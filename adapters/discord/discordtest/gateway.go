package discordtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Gateway close codes the fake sends.
const (
	CloseAuthFailed       = 4004 // a bad token in IDENTIFY
	CloseDisallowedIntent = 4014 // a privileged intent not switched on
)

// IntentMessageContent is the privileged MESSAGE_CONTENT intent bit.
const IntentMessageContent = 1 << 15

type event struct {
	seq int64
	t   string
	d   json.RawMessage
}

// gateway is the fake gateway websocket: one session at a time.
type gateway struct {
	s *Server

	mu            sync.Mutex
	conn          *websocket.Conn
	wmu           sync.Mutex // serialises writes to conn
	sessionID     string
	seq           int64
	log           []event
	identifies    int
	resumes       int
	intents       int
	refuseContent bool
	refuseToken   bool
	replay        int // events to dispatch again, with new numbers, on the next resume
	heartbeat     int // ms
	ready         chan struct{}
	tokens        []string // every token sent in IDENTIFY or RESUME
	pending       []event  // dispatched before any session: sent after the next READY
	identifyAt    []time.Time
	noAcks        bool // heartbeats go unanswered (a zombie connection)
}

func newGateway(s *Server) *gateway {
	return &gateway{s: s, heartbeat: 41250, ready: make(chan struct{})}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// RefuseMessageContent makes IDENTIFY with the MESSAGE_CONTENT intent fail
// with close code 4014, as when the switch is off in the developer portal.
func (s *Server) RefuseMessageContent() {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	s.gw.refuseContent = true
}

// RefuseIdentify makes every IDENTIFY fail with close code 4004, as a
// token Discord no longer accepts on the gateway.
func (s *Server) RefuseIdentify() {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	s.gw.refuseToken = true
}

// SetHeartbeat sets the heartbeat interval HELLO announces.
func (s *Server) SetHeartbeat(d time.Duration) {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	s.gw.heartbeat = int(d / time.Millisecond)
}

// Identifies returns how many IDENTIFYs the gateway got, Resumes how many
// RESUMEs.
func (s *Server) Identifies() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.identifies
}

// Resumes returns how many RESUMEs the gateway got.
func (s *Server) Resumes() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.resumes
}

// Intents returns the intents of the last IDENTIFY.
func (s *Server) Intents() int {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.intents
}

// Ready returns a channel closed once a session is ready (READY or
// RESUMED sent); it is replaced when the connection drops.
func (s *Server) Ready() <-chan struct{} {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return s.gw.ready
}

// Drop cuts the gateway connection without a close frame; the session
// stays resumable.
func (s *Server) Drop() {
	s.gw.mu.Lock()
	c := s.gw.conn
	s.gw.conn = nil
	s.gw.ready = make(chan struct{})
	s.gw.mu.Unlock()
	if c != nil {
		_ = c.UnderlyingConn().Close()
	}
}

// InvalidateSession sends op 9 (invalid session, not resumable) and
// closes the connection: the client must identify again.
func (s *Server) InvalidateSession() {
	s.gw.mu.Lock()
	c := s.gw.conn
	s.gw.conn = nil
	s.gw.sessionID = ""
	s.gw.ready = make(chan struct{})
	s.gw.mu.Unlock()
	if c != nil {
		s.gw.write(c, map[string]any{"op": 9, "d": false})
		s.gw.closeWith(c, 4009, "Session timed out.")
	}
}

// IdentifyTimes returns when each IDENTIFY arrived.
func (s *Server) IdentifyTimes() []time.Time {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return append([]time.Time(nil), s.gw.identifyAt...)
}

// StopAcks leaves heartbeats unanswered from now on (until ResumeAcks):
// the connection looks alive but is a zombie.
func (s *Server) StopAcks() {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	s.gw.noAcks = true
}

// ResumeAcks answers heartbeats again.
func (s *Server) ResumeAcks() {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	s.gw.noAcks = false
}

// RequestReconnect sends op 7: the client must reconnect and resume.
func (s *Server) RequestReconnect() {
	s.gw.mu.Lock()
	c := s.gw.conn
	s.gw.mu.Unlock()
	if c != nil {
		s.gw.write(c, map[string]any{"op": 7, "d": nil})
	}
}

// ReplayOnResume makes the next RESUME dispatch the last n events again,
// with new sequence numbers, after the missed ones.
func (s *Server) ReplayOnResume(n int) {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	s.gw.replay = n
}

// Dispatch sends an event (op 0) with the next sequence number; while no
// connection is up it is kept for a RESUME.
func (s *Server) Dispatch(t string, d any) {
	raw, _ := json.Marshal(d)
	g := s.gw
	g.mu.Lock()
	if g.sessionID == "" && t != "READY" {
		g.pending = append(g.pending, event{t: t, d: raw})
		g.mu.Unlock()
		return
	}
	g.seq++
	ev := event{seq: g.seq, t: t, d: raw}
	g.log = append(g.log, ev)
	c := g.conn
	g.mu.Unlock()
	if c != nil {
		g.write(c, map[string]any{"op": 0, "s": ev.seq, "t": ev.t, "d": ev.d})
	}
}

// DispatchMessage dispatches MESSAGE_CREATE for m, with mentions of the
// bot when mention is true.
func (s *Server) DispatchMessage(m *Message, mention bool) {
	d := map[string]any{"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "author": m.Author,
		"timestamp": m.Timestamp, "type": 0, "attachments": m.Attachments, "mentions": []User{}}
	if m.GuildID != "" {
		d["guild_id"] = m.GuildID
		d["member"] = map[string]any{}
		if m.Member != nil {
			d["member"] = m.Member
		}
	}
	if mention {
		d["mentions"] = []User{s.Bot}
	}
	if m.Reference != nil {
		d["message_reference"] = m.Reference
		if r, ok := s.Message(m.Reference.MessageID); ok {
			d["referenced_message"] = r
			d["type"] = 19
		}
	}
	s.Dispatch("MESSAGE_CREATE", d)
}

// Tokens returns every token the gateway received.
func (s *Server) GatewayTokens() []string {
	s.gw.mu.Lock()
	defer s.gw.mu.Unlock()
	return append([]string(nil), s.gw.tokens...)
}

func (g *gateway) write(c *websocket.Conn, v any) {
	g.wmu.Lock()
	defer g.wmu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = c.WriteJSON(v)
}

func (g *gateway) closeWith(c *websocket.Conn, code int, text string) {
	g.wmu.Lock()
	_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	g.wmu.Unlock()
	_ = c.Close()
}

func (g *gateway) closeAll() {
	g.mu.Lock()
	c := g.conn
	g.conn = nil
	g.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
}

// serve runs one gateway connection.
func (g *gateway) serve(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = c.Close() }()
	g.mu.Lock()
	hb := g.heartbeat
	g.mu.Unlock()
	g.write(c, map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": hb}})
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var f frame
	if err := c.ReadJSON(&f); err != nil {
		return
	}
	switch f.Op {
	case 2:
		if !g.identify(c, f.D) {
			return
		}
	case 6:
		if !g.resume(c, f.D) {
			return
		}
	default:
		g.closeWith(c, 4003, "Not authenticated.")
		return
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(time.Duration(hb)*time.Millisecond*2 + 10*time.Second))
		var f frame
		if err := c.ReadJSON(&f); err != nil {
			g.mu.Lock()
			if g.conn == c {
				g.conn = nil
				g.ready = make(chan struct{})
			}
			g.mu.Unlock()
			return
		}
		g.mu.Lock()
		silent := g.noAcks
		g.mu.Unlock()
		if f.Op == 1 && !silent {
			g.write(c, map[string]any{"op": 11})
		}
	}
}

func bare(tok string) string { return strings.TrimPrefix(tok, "Bot ") }

func (g *gateway) identify(c *websocket.Conn, raw json.RawMessage) bool {
	var id struct {
		Token   string `json:"token"`
		Intents int    `json:"intents"`
	}
	_ = json.Unmarshal(raw, &id)
	g.mu.Lock()
	g.identifies++
	g.identifyAt = append(g.identifyAt, time.Now())
	g.intents = id.Intents
	g.tokens = append(g.tokens, id.Token)
	refuse := g.refuseContent && id.Intents&IntentMessageContent != 0
	badToken := g.refuseToken
	g.mu.Unlock()
	if bare(id.Token) != g.s.Token || badToken {
		g.closeWith(c, CloseAuthFailed, "Authentication failed.")
		return false
	}
	if refuse {
		g.closeWith(c, CloseDisallowedIntent, "Disallowed intent(s).")
		return false
	}
	g.mu.Lock()
	session := g.s.NewID()
	g.sessionID = session
	g.seq, g.log = 0, nil
	g.conn = c
	pending := g.pending
	g.pending = nil
	g.mu.Unlock()
	// session, not g.sessionID: InvalidateSession may clear that already.
	ready := map[string]any{"v": 10, "session_id": session, "user": g.s.Bot,
		"application": map[string]any{"id": g.s.Bot.ID}, "guilds": []any{}, "private_channels": []any{},
		"resume_gateway_url": "ws" + strings.TrimPrefix(g.s.URL, "http") + "/gateway"}
	g.s.Dispatch("READY", ready)
	for _, ev := range pending {
		g.s.Dispatch(ev.t, ev.d)
	}
	g.markReady()
	return true
}

func (g *gateway) markReady() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ready:
	default:
		close(g.ready)
	}
}

func (g *gateway) resume(c *websocket.Conn, raw json.RawMessage) bool {
	var rs struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	_ = json.Unmarshal(raw, &rs)
	g.mu.Lock()
	g.resumes++
	g.tokens = append(g.tokens, rs.Token)
	ok := rs.SessionID != "" && rs.SessionID == g.sessionID
	g.mu.Unlock()
	if bare(rs.Token) != g.s.Token {
		g.closeWith(c, CloseAuthFailed, "Authentication failed.")
		return false
	}
	if !ok {
		g.write(c, map[string]any{"op": 9, "d": false})
		g.closeWith(c, 4009, "Session timed out.")
		return false
	}
	g.mu.Lock()
	var missed []event
	for _, ev := range g.log {
		if ev.seq > rs.Seq {
			missed = append(missed, ev)
		}
	}
	var again []event
	if n := min(g.replay, len(g.log)); n > 0 {
		again = append(again, g.log[len(g.log)-n:]...)
		g.replay = 0
	}
	g.conn = c
	g.mu.Unlock()
	for _, ev := range missed {
		g.write(c, map[string]any{"op": 0, "s": ev.seq, "t": ev.t, "d": ev.d})
	}
	for _, ev := range again {
		if ev.t != "READY" {
			g.s.Dispatch(ev.t, ev.d)
		}
	}
	g.s.Dispatch("RESUMED", map[string]any{})
	g.markReady()
	return true
}
