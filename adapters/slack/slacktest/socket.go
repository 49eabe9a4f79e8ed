package slacktest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// PingInterval is how often the fake pings a Socket Mode connection.
const PingInterval = 500 * time.Millisecond

// envelope is one Socket Mode request and its delivery state.
type envelope struct {
	id       string
	kind     string
	payload  json.RawMessage
	attempts int
	acked    bool
	ackedAt  time.Time
	sentAt   time.Time
}

// socketState is the Socket Mode side: the open connection, the envelopes
// and their acks.
type socketState struct {
	s *Server

	mu       sync.Mutex
	tickets  int
	conn     *websocket.Conn // the newest connection
	conns    []*websocket.Conn
	opened   int
	queue    []*envelope // in order of delivery
	byID     map[string]*envelope
	nextEnv  int
	changed  chan struct{}
	writeMus map[*websocket.Conn]*sync.Mutex
}

func newSocketState(s *Server) *socketState {
	return &socketState{s: s, byID: map[string]*envelope{}, changed: make(chan struct{}), writeMus: map[*websocket.Conn]*sync.Mutex{}}
}

func (st *socketState) ticket() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.tickets++
	return st.tickets
}

// notify wakes waiters. The caller holds st.mu.
func (st *socketState) notify() {
	close(st.changed)
	st.changed = make(chan struct{})
}

func (st *socketState) closeAll() {
	st.mu.Lock()
	conns := st.conns
	st.conns, st.conn = nil, nil
	st.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// write sends v on c, one writer at a time.
func (st *socketState) write(c *websocket.Conn, v any) error {
	st.mu.Lock()
	mu := st.writeMus[c]
	st.mu.Unlock()
	if mu == nil {
		return errors.New("connection closed")
	}
	mu.Lock()
	defer mu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return c.WriteJSON(v)
}

// websocket serves a Socket Mode connection: hello, then every
// unacknowledged envelope (again, as Slack retries), pings, and acks read
// back.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	st := s.sock
	if r.URL.Query().Get("ticket") == "" {
		http.Error(w, "no ticket", http.StatusUnauthorized)
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	st.mu.Lock()
	st.writeMus[c] = &sync.Mutex{}
	st.conn = c
	st.conns = append(st.conns, c)
	st.opened++
	pending := st.unacked()
	st.notify()
	st.mu.Unlock()
	defer st.drop(c)
	if st.write(c, map[string]any{"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "A0001"}}) != nil {
		return
	}
	for _, e := range pending {
		st.send(c, e)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(PingInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				st.mu.Lock()
				mu := st.writeMus[c]
				st.mu.Unlock()
				if mu == nil {
					return
				}
				mu.Lock()
				err := c.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(time.Second))
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}
	}()
	for {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := c.ReadJSON(&ack); err != nil {
			return
		}
		st.mu.Lock()
		if e := st.byID[ack.EnvelopeID]; e != nil && !e.acked {
			e.acked, e.ackedAt = true, time.Now()
			st.notify()
		}
		st.mu.Unlock()
	}
}

// unacked lists the envelopes not acknowledged yet. The caller holds
// st.mu.
func (st *socketState) unacked() []*envelope {
	var out []*envelope
	for _, e := range st.queue {
		if !e.acked {
			out = append(out, e)
		}
	}
	return out
}

func (st *socketState) drop(c *websocket.Conn) {
	st.mu.Lock()
	delete(st.writeMus, c)
	if st.conn == c {
		st.conn = nil
	}
	for i, x := range st.conns {
		if x == c {
			st.conns = append(st.conns[:i], st.conns[i+1:]...)
			break
		}
	}
	st.notify()
	st.mu.Unlock()
	_ = c.Close()
}

// send writes e on c as a new attempt.
func (st *socketState) send(c *websocket.Conn, e *envelope) {
	st.mu.Lock()
	e.attempts++
	e.sentAt = time.Now()
	msg := map[string]any{"envelope_id": e.id, "type": e.kind, "payload": e.payload,
		"accepts_response_payload": e.kind != "events_api", "retry_attempt": e.attempts - 1}
	if e.attempts > 1 {
		msg["retry_reason"] = "timeout"
	}
	st.mu.Unlock()
	_ = st.write(c, msg)
}

// Deliver sends a Socket Mode envelope of kind ("events_api",
// "slash_commands", "interactive") with payload on the open connection,
// or on the next one, and returns its id. An envelope not acknowledged is
// sent again on every new connection, as Slack retries.
func (s *Server) Deliver(kind string, payload []byte) string {
	st := s.sock
	st.mu.Lock()
	st.nextEnv++
	e := &envelope{id: "env-" + strconv.Itoa(st.nextEnv), kind: kind, payload: json.RawMessage(payload)}
	st.queue = append(st.queue, e)
	st.byID[e.id] = e
	c := st.conn
	st.mu.Unlock()
	if c != nil {
		st.send(c, e)
	}
	return e.id
}

// Redeliver sends an envelope again on the open connection, as Slack does
// when an ack came late.
func (s *Server) Redeliver(id string) {
	st := s.sock
	st.mu.Lock()
	e, c := st.byID[id], st.conn
	st.mu.Unlock()
	if e != nil && c != nil {
		st.send(c, e)
	}
}

// Acked reports whether the envelope id was acknowledged, and how long
// after its last sending.
func (s *Server) Acked(id string) (bool, time.Duration) {
	st := s.sock
	st.mu.Lock()
	defer st.mu.Unlock()
	e := st.byID[id]
	if e == nil || !e.acked {
		return false, 0
	}
	return true, e.ackedAt.Sub(e.sentAt)
}

// WaitAck waits up to d for the envelope id to be acknowledged.
func (s *Server) WaitAck(id string, d time.Duration) error {
	return s.waitSock(d, func(st *socketState) bool { e := st.byID[id]; return e != nil && e.acked })
}

// WaitConnected waits up to d until n connections were opened in all and
// one is open.
func (s *Server) WaitConnected(n int, d time.Duration) error {
	return s.waitSock(d, func(st *socketState) bool { return st.opened >= n && st.conn != nil })
}

// Connections returns how many Socket Mode connections were opened.
func (s *Server) Connections() int {
	s.sock.mu.Lock()
	defer s.sock.mu.Unlock()
	return s.sock.opened
}

func (s *Server) waitSock(d time.Duration, cond func(*socketState) bool) error {
	st := s.sock
	deadline := time.After(d)
	for {
		st.mu.Lock()
		okNow, ch := cond(st), st.changed
		st.mu.Unlock()
		if okNow {
			return nil
		}
		select {
		case <-ch:
		case <-deadline:
			return errors.New("slacktest: timed out waiting on Socket Mode")
		}
	}
}

// Disconnect sends a disconnect envelope with reason ("refresh_requested",
// "link_disabled", "warning") on the open connection and closes it soon
// after, as Slack does when it recycles a connection.
func (s *Server) Disconnect(reason string) {
	st := s.sock
	st.mu.Lock()
	c := st.conn
	st.mu.Unlock()
	if c == nil {
		return
	}
	_ = st.write(c, map[string]any{"type": "disconnect", "reason": reason,
		"debug_info": map[string]any{"host": "fake"}})
	time.AfterFunc(200*time.Millisecond, func() { _ = c.Close() })
}

// DropConnection closes the open connection without a word, as a network
// failure would.
func (s *Server) DropConnection() {
	st := s.sock
	st.mu.Lock()
	c := st.conn
	st.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}
