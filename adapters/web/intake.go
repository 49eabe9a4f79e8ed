package web

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// startWait bounds how long a request waits for Run to start.
const startWait = 5 * time.Second

// errNotRunning is returned to browsers while Run is not active.
var errNotRunning = errors.New("web chat is not running")

// intake hands the browsers' events to the sink of the active Run, and
// lets Run wait for the events being delivered when it ends.
type intake struct {
	log *slog.Logger

	mu       sync.Mutex
	sink     chat.Sink     // nil unless Run is active
	stop     chan struct{} // closed when the current Run ends
	inflight sync.WaitGroup
	// started is closed when Run first starts: requests that arrive just
	// before (the server listens before the gateway runs) wait for it.
	started     chan struct{}
	startedOnce sync.Once
}

// run hands browser events to sink until ctx ends, then waits for the
// events being delivered and returns nil (see Adapter.Run).
func (t *intake) run(ctx context.Context, sink chat.Sink) error {
	if sink == nil {
		return errors.New("web: run: nil sink")
	}
	t.mu.Lock()
	if t.sink != nil {
		t.mu.Unlock()
		return errors.New("web: run: already running")
	}
	t.sink = sink
	t.stop = make(chan struct{})
	t.mu.Unlock()
	t.startedOnce.Do(func() { close(t.started) })
	t.log.Info("web chat running")

	<-ctx.Done()

	t.mu.Lock()
	t.sink = nil
	close(t.stop)
	t.mu.Unlock()
	t.inflight.Wait()
	return nil
}

// waitStarted waits until Run has started once, ctx ends or startWait
// passes.
func (t *intake) waitStarted(ctx context.Context) {
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case <-t.started:
	case <-ctx.Done():
	case <-timer.C:
	}
}

// deliver passes in to the sink of the active Run.
func (t *intake) deliver(ctx context.Context, in chat.Inbound) error {
	t.waitStarted(ctx)
	t.mu.Lock()
	sink := t.sink
	if sink == nil {
		t.mu.Unlock()
		return errNotRunning
	}
	t.inflight.Add(1)
	t.mu.Unlock()
	defer t.inflight.Done()
	return sink(ctx, in)
}

// running returns a channel closed when the active Run ends, or nil if
// Run is not active.
func (t *intake) running() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sink == nil {
		return nil
	}
	return t.stop
}
