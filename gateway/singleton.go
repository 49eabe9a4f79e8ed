package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
)

// Back-off of a replica waiting for a singleton adapter's lease.
const (
	singletonRetryMin = time.Second
	singletonRetryMax = 30 * time.Second
)

// runAdapter runs a's Run until ctx ends. A chat.Singleton adapter runs
// only while this replica holds its lease (runSingleton).
func (g *Gateway) runAdapter(ctx context.Context, a chat.Adapter) error {
	if s, ok := a.(chat.Singleton); ok {
		if key := s.SingletonKey(); key != "" {
			return g.runSingleton(ctx, a, "adapter:"+key)
		}
	}
	return a.Run(ctx, g.intake.sink)
}

// runSingleton runs a's Run under the lease key: it waits for the lease
// (another replica may hold it), runs the adapter while the lease is held,
// cancels Run the moment the lease is lost, and then waits for the lease
// again, backing off, until ctx ends. With the local Locker the lease is
// always granted and never lost. An error that ends Run on its own is
// returned, as for any adapter.
func (g *Gateway) runSingleton(ctx context.Context, a chat.Adapter, key string) error {
	retry := singletonRetryMin
	var fence int64 // the highest fence granted so far: the next is above it
	for {
		lease, err := g.locker.Acquire(ctx, key, fence)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, cluster.ErrLeaseHeld) {
				g.log.Debug("adapter runs on another replica; waiting", "platform", a.Platform(), "lease", key)
			} else {
				g.log.Warn("adapter lease", "platform", a.Platform(), "lease", key, "err", err)
			}
			if !sleepCtx(ctx, retry) {
				return nil
			}
			retry = min(2*retry, singletonRetryMax)
			continue
		}
		fence = max(fence, lease.Fence())
		retry = singletonRetryMin
		lost, err := g.runLeased(ctx, a, lease)
		g.release(context.WithoutCancel(ctx), lease)
		if !lost || ctx.Err() != nil {
			return err
		}
		g.log.Warn("adapter lease lost; stopped receiving here", "platform", a.Platform(), "lease", key)
		if !sleepCtx(ctx, retry) {
			return nil
		}
	}
}

// runLeased runs a's Run until it returns or lease is lost (lost true: Run
// was cancelled and has returned).
func (g *Gateway) runLeased(ctx context.Context, a chat.Adapter, lease cluster.Lease) (lost bool, err error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx, g.intake.sink) }()
	select {
	case err := <-done:
		return false, err
	case <-lease.Done():
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			g.log.Warn("adapter stopped after its lease was lost", "platform", a.Platform(), "err", err)
		}
		return true, nil
	}
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
