package slacktest

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// InMemory serves the fake over in-memory connections (net.Pipe) and
// returns a client whose every request goes to it, whatever its URL, for
// tests whose time is fake (testing/synctest): called inside the bubble,
// the fake answers there, so its record of calls, its timestamps and its
// rate model all read the bubble's clock. stop closes the client's and the
// server's connections; call it before the bubble ends.
func (s *Server) InMemory() (client *http.Client, stop func()) {
	l := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: s.mux}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l) // returns when stop closes l
	}()
	tr := &http.Transport{DialContext: l.dial}
	stop = func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-served
	}
	return &http.Client{Transport: tr}, stop
}

// pipeListener hands the server the far ends of the pipes its dial makes.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial connects to the listener, ignoring the address.
func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
	case <-ctx.Done():
	}
	_ = client.Close()
	_ = server.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, net.ErrClosed
}

// pipeAddr is the address of an in-memory listener.
type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "slacktest-in-memory" }
