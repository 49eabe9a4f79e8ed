package mcp

import (
	"bytes"

	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"sort"
	"sync"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport builds the connection to the server. The returned func runs
// after the session closed: for a stdio server it kills what is left of
// its process group.
func (s *server) transport() (sdk.Transport, func(), error) {
	if s.cfg.URL != "" {
		hc := &http.Client{Transport: &headerTransport{base: http.DefaultTransport, srv: &s.cfg}}
		if s.opts.HTTPClient != nil {
			hc = &http.Client{Transport: &headerTransport{base: s.opts.HTTPClient.Transport, srv: &s.cfg}}
		}
		return &sdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, MaxRetries: -1}, func() {}, nil
	}
	cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
	cmd.Dir = s.cfg.Dir
	cmd.Env = s.environ()
	// Its own process group, so stopping the server stops everything it
	// started; and killed with pibot if pibot dies without stopping it.
	cmd.SysProcAttr = groupAttr()
	stderr := &lineLogger{log: s.log}
	cmd.Stderr = stderr
	tr := &sdk.CommandTransport{Command: cmd, TerminateDuration: s.opts.StopTimeout}
	return tr, func() {
		if cmd.Process != nil {
			// The leader is reaped by the transport; its group may
			// still hold children.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		stderr.flush()
	}, nil
}

// environ is the server's environment: the base one, then its own env
// (overriding by name).
func (s *server) environ() []string {
	env := make([]string, 0, len(s.opts.Environ)+len(s.cfg.Env))
	for _, kv := range s.opts.Environ {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if _, own := s.cfg.Env[name]; !own {
			env = append(env, kv)
		}
	}
	names := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		env = append(env, k+"="+s.cfg.Env[k].Reveal())
	}
	return env
}

// headerTransport adds the server's headers to every request.
type headerTransport struct {
	base http.RoundTripper
	srv  *Server
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := h.base
	if base == nil {
		base = http.DefaultTransport
	}
	if len(h.srv.Headers) == 0 {
		return base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range h.srv.Headers {
		r.Header.Set(k, v.Reveal())
	}
	return base.RoundTrip(r)
}

// lineLogger logs what a stdio server writes to stderr, a line at a time
// (long lines are cut).
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

const maxStderrLine = 2000

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxStderrLine {
				l.emit(l.buf[:maxStderrLine])
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	l.log.Info("mcp server stderr", "line", string(line))
}

var _ io.Writer = (*lineLogger)(nil)
