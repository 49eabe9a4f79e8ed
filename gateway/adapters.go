package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
)

// How often a replica asks for a singleton adapter's lease: every
// singletonRetryMin while another replica holds it (a standby must notice
// at once that its holder died), with back-off up to singletonRetryMax
// while asking fails (the store does not answer).
const (
	singletonRetryMin = time.Second
	singletonRetryMax = 30 * time.Second
)

// How often a failed command registration is tried again.
const (
	registerRetryMin = 5 * time.Second
	registerRetryMax = 5 * time.Minute
)

// AdapterLeasePrefix leads the key of a singleton adapter's lease (a
// leader role: "adapter:telegram/poll/<bot id>").
const AdapterLeasePrefix = "adapter:"

// adapterRunner runs the adapters: each feeds sink, a chat.Singleton one
// only while this replica holds its lease.
type adapterRunner struct {
	adapters map[chat.Platform]chat.Adapter
	locker   Locker
	log      *slog.Logger
	sink     chat.Sink
	// commands is the command list platforms show.
	commands func() []chat.CommandSpec
	// wait waits d before the lease is asked for again; false if ctx
	// ended first (nil: sleepCtx; tests count the waits).
	wait func(ctx context.Context, d time.Duration) bool
}

// registerCommands tells every adapter that can show commands which there
// are, each on a goroutine of its own under wg: a platform that does not
// answer must not hold up the start (its adapter reports itself through
// Health). A failed registration is tried again in the background, with
// back-off, until it succeeds or ctx ends.
func (ar *adapterRunner) registerCommands(ctx context.Context, wg *sync.WaitGroup) {
	for _, a := range ar.adapters {
		if r, ok := a.(chat.CommandRegistrar); ok {
			wg.Go(func() { ar.registerLoop(ctx, a.Platform(), r) })
		}
	}
}

// registerLoop registers the commands with r until it succeeds. It logs
// the first failure and the recovery, not every attempt.
func (ar *adapterRunner) registerLoop(ctx context.Context, p chat.Platform, r chat.CommandRegistrar) {
	wait := ar.wait
	if wait == nil {
		wait = sleepCtx
	}
	retry := registerRetryMin
	for failures := 0; ; failures++ {
		err := r.RegisterCommands(ctx, ar.commands())
		if err == nil {
			if failures > 0 {
				ar.log.Info("commands registered", "platform", p, "after_failures", failures)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		if failures == 0 {
			// The adapter's error names its platform already.
			ar.log.Warn("register commands failed; retrying in the background", "platform", p, "in", retry, "err", err)
		} else {
			ar.log.Debug("register commands failed again", "platform", p, "in", retry, "err", err)
		}
		if !wait(ctx, retry) {
			return
		}
		retry = min(2*retry, registerRetryMax)
	}
}

// runAdapter runs a's Run until ctx ends. A chat.Singleton adapter runs
// only while this replica holds its lease (runSingleton).
func (ar *adapterRunner) runAdapter(ctx context.Context, a chat.Adapter) error {
	if s, ok := a.(chat.Singleton); ok {
		if key := s.SingletonKey(); key != "" {
			return ar.runSingleton(ctx, a, AdapterLeasePrefix+key)
		}
	}
	return a.Run(ctx, ar.sink)
}

// runSingleton runs a's Run under the lease key: it waits for the lease
// (another replica may hold it), runs the adapter while the lease is held,
// cancels Run the moment the lease is lost, and then waits for the lease
// again, backing off, until ctx ends. With the local Locker the lease is
// always granted and never lost. An error that ends Run on its own is
// returned, as for any adapter.
func (ar *adapterRunner) runSingleton(ctx context.Context, a chat.Adapter, key string) error {
	wait := ar.wait
	if wait == nil {
		wait = sleepCtx
	}
	retry := singletonRetryMin
	var fence int64 // the highest fence granted so far: the next is above it
	for {
		lease, err := ar.locker.Acquire(ctx, key, fence)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, cluster.ErrLeaseHeld) {
				// The normal state of a standby, not a failure: it asks
				// again soon, however long it has waited, so that it takes
				// over about a lease TTL after its holder died (with
				// back-off, a standby that had waited a minute asked only
				// every 30 s, and the bot went unheard that much longer).
				ar.log.Debug("adapter runs on another replica; waiting", "platform", a.Platform(), "lease", key)
				retry = singletonRetryMin
				if !wait(ctx, retry) {
					return nil
				}
				continue
			}
			ar.log.Warn("adapter lease", "platform", a.Platform(), "lease", key, "err", err)
			if !wait(ctx, retry) {
				return nil
			}
			retry = min(2*retry, singletonRetryMax)
			continue
		}
		fence = max(fence, lease.Fence())
		retry = singletonRetryMin
		lost, err := ar.runLeased(ctx, a, lease)
		release(context.WithoutCancel(ctx), ar.log, lease)
		if !lost || ctx.Err() != nil {
			return err
		}
		ar.log.Warn("adapter lease lost; stopped receiving here", "platform", a.Platform(), "lease", key)
		if !wait(ctx, retry) {
			return nil
		}
	}
}

// runLeased runs a's Run until it returns or lease is lost (lost true: Run
// was cancelled and has returned).
func (ar *adapterRunner) runLeased(ctx context.Context, a chat.Adapter, lease cluster.Lease) (lost bool, err error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ar.runUnder(runCtx, a, lease) }()
	select {
	case err := <-done:
		return false, err
	case <-lease.Done():
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			ar.log.Warn("adapter stopped after its lease was lost", "platform", a.Platform(), "err", err)
		}
		return true, nil
	}
}

// runUnder runs a under lease: bounded by the lease's deadline when both
// can (chat.BoundedRunner, cluster.DeadlineLease; a local lease has no
// deadline: it is never lost).
func (ar *adapterRunner) runUnder(ctx context.Context, a chat.Adapter, lease cluster.Lease) error {
	b, ok := a.(chat.BoundedRunner)
	d, dok := lease.(cluster.DeadlineLease)
	if !ok || !dok {
		return a.Run(ctx, ar.sink)
	}
	return b.RunBounded(ctx, ar.sink, func() time.Duration { return time.Until(d.Deadline()) })
}

// sleepCtx sleeps d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
