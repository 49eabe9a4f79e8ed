package mcp

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Manager owns the configured MCP servers. Its zero value is not usable;
// call New, and Close when pibot stops.
type Manager struct {
	opts    Options
	log     *slog.Logger
	servers []*server // in configuration order

	mu      sync.Mutex
	started map[string]bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// New checks the servers and returns a manager that has started none of
// them.
func New(opts Options) (*Manager, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 20 * time.Second
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(time.Minute, opts.MinBackoff)
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 2 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{opts: opts, log: log, started: map[string]bool{}, stop: make(chan struct{})}
	seen := map[string]bool{}
	for _, s := range opts.Servers {
		if err := ValidName(s.Name); err != nil {
			return nil, fmt.Errorf("mcp: server name: %w", err)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("mcp: server %q configured twice", s.Name)
		}
		seen[s.Name] = true
		if (s.Command == "") == (s.URL == "") {
			return nil, fmt.Errorf("mcp: server %q: set either command (stdio) or url (streamable HTTP)", s.Name)
		}
		m.servers = append(m.servers, newServer(s, &m.opts, log))
	}
	return m, nil
}

// Len is the number of configured servers.
func (m *Manager) Len() int { return len(m.servers) }

// start starts the supervisors of servers not started yet.
func (m *Manager) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for _, s := range m.servers {
		if m.started[s.cfg.Name] {
			continue
		}
		m.started[s.cfg.Name] = true
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			s.run(m.stop)
		}()
	}
}

// Start starts every server (if not started yet) and waits until each
// has made its first connection attempt or ctx is done.
func (m *Manager) Start(ctx context.Context) {
	m.start()
	for _, s := range m.servers {
		select {
		case <-s.first:
		case <-ctx.Done():
			return
		}
	}
}

// Tools starts the servers on first use (waiting at most the start
// timeout for their first listing) and returns the tools of every server
// as last listed. A server that is down keeps its tools; calling them
// returns an error until it is back.
func (m *Manager) Tools(ctx context.Context) []*Tool {
	ctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	m.Start(ctx)
	var out []*Tool
	seen := map[string]bool{}
	for _, s := range m.servers {
		s.mu.Lock()
		list := s.tools
		s.mu.Unlock()
		for _, t := range list {
			name := ToolName(s.cfg.Name, t.Name)
			if seen[name] {
				m.log.Warn("mcp: two tools map to one name; the later is left out", "tool", name, "remote", t.Name)
				continue
			}
			seen[name] = true
			out = append(out, newTool(s, name, t, m.opts.CallTimeout))
		}
	}
	return out
}

// Status reports every server, in configuration order.
func (m *Manager) Status() []Status {
	out := make([]Status, len(m.servers))
	for i, s := range m.servers {
		out[i] = s.status()
	}
	return out
}

// Close stops every server (closing its connection and killing its
// process group) and waits for the supervisors to end.
func (m *Manager) Close() error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.stop)
	}
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}
