package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// forgetRetries forgets again, in cluster mode, the dedupe keys of
// refused events whose Dedupe.Forget failed (Redis did not answer). Such
// a key may be recorded (a Seen that ran before its answer was lost, or
// before the admission failed) while the event was never enqueued: left
// alone, the platform's redelivery would be dropped as a duplicate and
// the event lost. A key an admission recorded its item in stays
// (rediscluster.Dedupe.Forget keeps it), so forgetting late never makes
// an enqueued event's redelivery a second item. A retry waits as the
// acknowledgements' do (retryLoop); the keys are given up when the
// process stops (the pump's goroutine owns run), and at most
// forgetRetryLimit wait. A key given up so is no loss: a key Seen
// records is pending (cluster.Committer) and expires by itself within
// the dedupe's pending time; until then its redelivery is refused as in
// flight, so the platform delivers it again. The retries only make the
// redelivery taken sooner.
type forgetRetries struct {
	dedupe Dedupe
	log    *slog.Logger
	wake   chan struct{} // one buffered: something was added

	mu      sync.Mutex
	due     []string
	stopped bool
}

// forgetRetryLimit bounds the keys waiting for a retry.
const forgetRetryLimit = 4096

// forgetTimeout bounds one Forget.
const forgetTimeout = 2 * time.Second

func newForgetRetries(d Dedupe, log *slog.Logger) *forgetRetries {
	return &forgetRetries{dedupe: d, log: log, wake: make(chan struct{}, 1)}
}

// add queues key for a retry; false when it is not queued (too many
// wait, run has stopped, or f is nil).
func (f *forgetRetries) add(key string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	ok := !f.stopped && len(f.due) < forgetRetryLimit
	if ok {
		f.due = append(f.due, key)
	}
	f.mu.Unlock()
	if ok {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
	return ok
}

// take removes key from the queue and reports whether it was there: a
// redelivery found it a duplicate before the retry came.
func (f *forgetRetries) take(key string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, k := range f.due {
		if k == key {
			f.due = append(f.due[:i], f.due[i+1:]...)
			return true
		}
	}
	return false
}

// run retries the queued keys until ctx ends; then it drops them and
// queues nothing more.
func (f *forgetRetries) run(ctx context.Context) {
	defer func() {
		f.mu.Lock()
		f.stopped, f.due = true, nil
		f.mu.Unlock()
	}()
	retryLoop(ctx, f.wake, f.retry)
}

// retry forgets the queued keys, oldest first, up to the first that
// fails again (Redis still does not answer: the rest wait with it). It
// returns how many are left and whether one failed.
func (f *forgetRetries) retry(ctx context.Context) (left int, failed bool) {
	f.mu.Lock()
	due := f.due
	f.due = nil
	f.mu.Unlock()
	var keep []string
	for i, key := range due {
		fctx, cancel := context.WithTimeout(ctx, forgetTimeout)
		err := f.dedupe.Forget(fctx, key)
		cancel()
		if err != nil {
			f.log.Debug("dedupe: forget again failed", "key", key, "err", err)
			keep = append(keep, due[i:]...)
			failed = true
			break
		}
		f.log.Info("dedupe: a refused event's key forgotten after a failure", "key", key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return 0, failed
	}
	f.due = append(keep, f.due...)
	return len(f.due), failed
}
