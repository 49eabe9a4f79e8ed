package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pibot/pibot/internal/backoff"
)

// State is where a server's supervisor is.
type State string

// The states of a server.
const (
	StateIdle       State = "idle"       // not started yet (servers start lazily)
	StateStarting   State = "starting"   // connecting for the first time
	StateReady      State = "ready"      // connected, tools listed
	StateRestarting State = "restarting" // the connection failed or ended; waiting to reconnect
	StateStopped    State = "stopped"    // the manager closed
)

// server supervises one MCP server: it connects, lists the tools, waits
// for the connection to end or the tool list to change, and reconnects
// with back-off.
type server struct {
	cfg  Server
	opts *Options
	log  *slog.Logger

	changed chan struct{} // a tools/list_changed arrived (capacity 1)
	first   chan struct{} // closed after the first connection attempt

	mu       sync.Mutex
	state    State
	err      error // why the last connection failed or ended
	session  *sdk.ClientSession
	tools    []*sdk.Tool // last listing
	restarts int
	retryAt  time.Time
}

func newServer(cfg Server, opts *Options, log *slog.Logger) *server {
	return &server{cfg: cfg, opts: opts, log: log.With("mcp_server", cfg.Name),
		changed: make(chan struct{}, 1), first: make(chan struct{}), state: StateIdle}
}

// transportName is "stdio" or "http".
func (s *server) transportName() string {
	if s.cfg.URL != "" {
		return "http"
	}
	return "stdio"
}

// run is the supervisor loop; it returns when stop closes.
func (s *server) run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	failures := 0
	firstDone := false
	signalFirst := func() {
		if !firstDone {
			firstDone = true
			close(s.first)
		}
	}
	defer signalFirst()
	for {
		err := s.connectAndServe(ctx, signalFirst)
		if ctx.Err() != nil {
			s.setState(StateStopped, nil)
			return
		}
		if errors.Is(err, errServed) {
			failures = 0 // it ran: restart quickly
		}
		failures++
		wait := backoff.Exp(s.opts.MinBackoff, failures, s.opts.MaxBackoff)
		s.mu.Lock()
		s.state, s.err, s.session = StateRestarting, err, nil
		s.restarts++
		s.retryAt = time.Now().Add(wait)
		s.mu.Unlock()
		s.log.Warn("mcp server unavailable, restarting", "err", err, "in", wait)
		signalFirst()
		if backoff.Sleep(ctx, wait) != nil {
			s.setState(StateStopped, nil)
			return
		}
	}
}

// errServed marks a connection that was up and then ended.
var errServed = errors.New("connection ended")

// connectAndServe connects once and serves until the connection ends or
// ctx is done.
func (s *server) connectAndServe(ctx context.Context, ready func()) error {
	s.mu.Lock()
	if s.state == StateIdle {
		s.state = StateStarting
	}
	s.mu.Unlock()
	tr, closeTr, err := s.transport()
	if err != nil {
		return err
	}
	defer closeTr()
	client := sdk.NewClient(&sdk.Implementation{Name: "pibot", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default:
			}
		},
	})
	cctx, ccancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		ccancel()
		return fmt.Errorf("connect: %w", err)
	}
	tools, err := listTools(cctx, cs)
	ccancel()
	if err != nil {
		_ = cs.Close()
		return fmt.Errorf("list tools: %w", err)
	}
	s.mu.Lock()
	s.state, s.err, s.session, s.tools = StateReady, nil, cs, tools
	s.mu.Unlock()
	s.log.Info("mcp server ready", "tools", len(tools))
	ready()

	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	for {
		select {
		case <-s.changed:
			lctx, lcancel := context.WithTimeout(ctx, s.opts.StartTimeout)
			tools, err := listTools(lctx, cs)
			lcancel()
			if err != nil {
				s.log.Warn("mcp server: listing changed tools failed", "err", err)
				continue
			}
			s.mu.Lock()
			s.tools = tools
			s.mu.Unlock()
			s.log.Info("mcp server tools changed", "tools", len(tools))
		case err := <-ended:
			_ = cs.Close()
			if err == nil {
				return errServed
			}
			return fmt.Errorf("%w: %w", errServed, err)
		case <-ctx.Done():
			_ = cs.Close()
			<-ended
			return ctx.Err()
		}
	}
}

// listTools lists every page of the server's tools.
func listTools(ctx context.Context, cs *sdk.ClientSession) ([]*sdk.Tool, error) {
	var out []*sdk.Tool
	params := &sdk.ListToolsParams{}
	for {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" {
			return out, nil
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
}

func (s *server) setState(st State, err error) {
	s.mu.Lock()
	s.state, s.err = st, err
	s.session = nil
	s.mu.Unlock()
}

// current returns the session to call, or an error saying why there is
// none.
func (s *server) current() (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil {
		return s.session, nil
	}
	switch s.state {
	case StateRestarting:
		wait := time.Until(s.retryAt).Round(time.Second)
		return nil, fmt.Errorf("MCP server %q is unavailable (%v) and is being restarted (next attempt in %s); try again later",
			s.cfg.Name, s.err, max(wait, 0))
	case StateStopped:
		return nil, fmt.Errorf("MCP server %q is stopped (pibot is shutting down)", s.cfg.Name)
	default:
		return nil, fmt.Errorf("MCP server %q is still starting; try again shortly", s.cfg.Name)
	}
}

// Status is what `pibot mcp list` shows of a server.
type Status struct {
	Name      string
	Transport string // stdio or http
	State     State
	// Err is why the server is not ready ("" when it is).
	Err      string
	Restarts int
	// Tools are the names the model sees, with their descriptions.
	Tools []ToolInfo
}

// ToolInfo names one tool of a server.
type ToolInfo struct {
	Name        string // as the model sees it: SERVER__tool
	Description string
}

func (s *server) status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Name: s.cfg.Name, Transport: s.transportName(), State: s.state, Restarts: s.restarts}
	if s.err != nil {
		st.Err = s.err.Error()
	}
	for _, t := range s.tools {
		st.Tools = append(st.Tools, ToolInfo{Name: ToolName(s.cfg.Name, t.Name), Description: t.Description})
	}
	return st
}
