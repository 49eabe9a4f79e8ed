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

// feeder hands the browsers' events to the sink of the active Run, and
// lets Run wait for the events being fed when it ends.
type feeder struct {
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
// events being fed and returns nil (see Adapter.Run).
func (f *feeder) run(ctx context.Context, sink chat.Sink) error {
	if sink == nil {
		return errors.New("web: run: nil sink")
	}
	f.mu.Lock()
	if f.sink != nil {
		f.mu.Unlock()
		return errors.New("web: run: already running")
	}
	f.sink = sink
	f.stop = make(chan struct{})
	f.mu.Unlock()
	f.startedOnce.Do(func() { close(f.started) })
	f.log.Info("web chat running")

	<-ctx.Done()

	f.mu.Lock()
	f.sink = nil
	close(f.stop)
	f.mu.Unlock()
	f.inflight.Wait()
	return nil
}

// waitStarted waits until Run has started once, ctx ends or startWait
// passes.
func (f *feeder) waitStarted(ctx context.Context) {
	timer := time.NewTimer(startWait)
	defer timer.Stop()
	select {
	case <-f.started:
	case <-ctx.Done():
	case <-timer.C:
	}
}

// feed passes in to the sink of the active Run.
func (f *feeder) feed(ctx context.Context, in chat.Inbound) error {
	f.waitStarted(ctx)
	f.mu.Lock()
	sink := f.sink
	if sink == nil {
		f.mu.Unlock()
		return errNotRunning
	}
	f.inflight.Add(1)
	f.mu.Unlock()
	defer f.inflight.Done()
	return sink(ctx, in)
}

// running returns a channel closed when the active Run ends, or nil if
// Run is not active.
func (f *feeder) running() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sink == nil {
		return nil
	}
	return f.stop
}
