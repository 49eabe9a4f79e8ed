package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// Gateway intents pibot identifies with: GUILD_MESSAGES, DIRECT_MESSAGES
// and the privileged MESSAGE_CONTENT.
const intents = 1<<9 | 1<<12 | 1<<15

// gatewayVersion is the gateway protocol version.
const gatewayVersion = "10"

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opResume         = 6
	opReconnect      = 7
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatAck   = 11
)

// errIntent is the refusal of the MESSAGE_CONTENT intent (close code 4014).
var errIntent = errors.New("discord: Discord refused the MESSAGE_CONTENT intent (gateway close code 4014): switch on " +
	"\"MESSAGE CONTENT INTENT\" under Privileged Gateway Intents on the Bot page of your application in the Discord developer portal, then restart pibot")

// gatewayClient is the gateway websocket client: one connection at a
// time, the session a RESUME needs, and the identifies that set the
// back-off, kept in a stateStore across restarts.
type gatewayClient struct {
	calls *caller // gateway discovery
	log   *slog.Logger
	token secret.Secret
	state *resumeState
	// onReady learns the bot's user id and the application id from READY.
	onReady func(user, app string)
}

// gwSession is what a RESUME needs.
type gwSession struct {
	id        string
	seq       int64 // the last sequence number received
	done      int64 // the last one whose event was handled (what a restart resumes from)
	resumeURL string
}

// frame is one gateway payload.
type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// dispatch is one event for the processor.
type dispatch struct {
	t       string
	d       json.RawMessage
	seq     int64
	session string
}

// outcome is how one connection ended.
type outcome struct {
	code      int  // websocket close code, 0 if none
	resumable bool // the session may be resumed
	ready     bool // READY or RESUMED was received
	err       error
}

// conn is one gateway connection with serialised writes.
type conn struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (c *conn) send(op int, d any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteJSON(map[string]any{"op": op, "d": d})
}

// dispatchOf makes a dispatch of a frame, tagged with the session it
// belongs to.
func (g *gatewayClient) dispatchOf(f frame) dispatch {
	d := dispatch{t: f.T, d: f.D, session: g.state.session().id}
	if f.S != nil {
		d.seq = *f.S
	}
	return d
}

// connect runs one gateway connection until it ends: hello, IDENTIFY (or
// RESUME when a session is known), heartbeats, and dispatches handed to
// events in order.
func (g *gatewayClient) connect(ctx context.Context, url string, events chan<- dispatch) outcome {
	d := websocket.Dialer{HandshakeTimeout: 20 * time.Second, Proxy: http.ProxyFromEnvironment}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	ws, _, err := d.DialContext(ctx, url+sep+"v="+gatewayVersion+"&encoding=json", nil)
	if err != nil {
		return outcome{resumable: true, err: fmt.Errorf("dial gateway: %w", err)}
	}
	c := &conn{ws: ws}
	ws.SetReadLimit(32 << 20)
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	defer func() { _ = ws.Close() }()

	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var hello frame
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != opHello {
		return outcome{resumable: true, err: fmt.Errorf("gateway hello: %v (op %d)", err, hello.Op)}
	}
	var h struct {
		Interval int64 `json:"heartbeat_interval"`
	}
	if err := json.Unmarshal(hello.D, &h); err != nil || h.Interval <= 0 {
		return outcome{resumable: true, err: errors.New("gateway hello without a heartbeat interval")}
	}
	interval := time.Duration(h.Interval) * time.Millisecond

	sess := g.state.session()
	if sess.id != "" {
		err = c.send(opResume, map[string]any{"token": g.token.Reveal(), "session_id": sess.id, "seq": sess.seq})
	} else {
		err = c.send(opIdentify, map[string]any{"token": g.token.Reveal(), "intents": intents,
			"properties": map[string]string{"os": "linux", "browser": "pibot", "device": "pibot"}})
	}
	if err != nil {
		return outcome{resumable: true, err: fmt.Errorf("gateway: send %s: %v", map[bool]string{true: "resume", false: "identify"}[sess.id != ""], err)}
	}

	var acked atomic.Bool
	acked.Store(true)
	hbCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.heartbeat(hbCtx, c, interval, &acked)
	}()
	defer func() {
		cancel()
		_ = ws.Close()
		wg.Wait()
	}()
	return g.read(ctx, c, interval, &acked, events)
}

// heartbeat sends op 1 every interval (the first after a random part of
// it) and closes a connection whose last heartbeat got no ACK (a zombie).
func (g *gatewayClient) heartbeat(ctx context.Context, c *conn, interval time.Duration, acked *atomic.Bool) {
	wait := time.Duration(rand.Float64() * float64(interval))
	for {
		if tokenbucket.Wait(ctx, wait) != nil {
			return
		}
		wait = interval
		if !acked.Swap(false) {
			g.log.Warn("discord: no heartbeat ACK; reconnecting")
			_ = c.ws.Close()
			return
		}
		if err := c.send(opHeartbeat, g.state.lastSeq()); err != nil {
			return
		}
	}
}

// read reads payloads until the connection ends.
func (g *gatewayClient) read(ctx context.Context, c *conn, interval time.Duration, acked *atomic.Bool, events chan<- dispatch) outcome {
	var out outcome
	out.resumable = true
	for {
		_ = c.ws.SetReadDeadline(time.Now().Add(2*interval + 30*time.Second))
		var f frame
		if err := c.ws.ReadJSON(&f); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				out.code = ce.Code
			}
			out.err = err
			return out
		}
		switch f.Op {
		case opDispatch:
			if f.S != nil {
				g.state.update(func(s *gwSession) { s.seq = *f.S })
			}
			switch f.T {
			case "READY":
				g.ready(f.D)
				out.ready = true
				continue
			case "RESUMED":
				out.ready = true
				g.log.Info("discord: gateway session resumed")
				continue
			}
			select {
			case events <- g.dispatchOf(f):
			case <-ctx.Done():
				out.err = ctx.Err()
				return out
			}
		case opHeartbeat:
			_ = c.send(opHeartbeat, g.state.lastSeq())
		case opHeartbeatAck:
			acked.Store(true)
		case opReconnect:
			out.err = errors.New("gateway asked to reconnect (op 7)")
			return out
		case opInvalidSession:
			var resumable bool
			_ = json.Unmarshal(f.D, &resumable)
			if !resumable {
				g.state.update(func(s *gwSession) { *s = gwSession{} })
			}
			out.resumable = resumable
			out.err = errors.New("gateway: invalid session (op 9)")
			return out
		}
	}
}

// ready records READY: the session for RESUME, the bot's id, the
// application id.
func (g *gatewayClient) ready(raw json.RawMessage) {
	var r struct {
		SessionID string `json:"session_id"`
		ResumeURL string `json:"resume_gateway_url"`
		User      struct {
			ID       string `json:"id"`
			Username string `json:"username"`
		} `json:"user"`
		Application struct {
			ID string `json:"id"`
		} `json:"application"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		g.log.Warn("discord: unreadable READY", "err", err)
		return
	}
	g.state.update(func(s *gwSession) { s.id, s.resumeURL, s.done = r.SessionID, r.ResumeURL, 0 })
	g.state.persist(true)
	if g.onReady != nil {
		g.onReady(r.User.ID, r.Application.ID)
	}
	g.log.Info("discord: connected", "bot", r.User.Username, "id", r.User.ID)
}
