package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pibot/pibot/cluster"
)

// ackRetries acknowledges again, in cluster mode, the inbox items whose
// Ack failed: Redis did not answer (or its answer was lost) after their
// runs ended. Left alone such an item stays pending until its session's
// lease ends, and the replica that takes it over then recognises its
// answer in the session; retried, it leaves the inbox as soon as Redis
// answers. A retry waits resyncFirst, twice as long after each failure up
// to resyncMax while Redis does not answer. An item is given up when its
// session's lease ends (its next holder takes it over) or the process
// stops (the pump's goroutine owns run), and at most ackRetryLimit wait:
// beyond that, the lease's end takes care of them.
type ackRetries struct {
	inbox Inbox
	log   *slog.Logger
	wake  chan struct{} // one buffered: something was added

	mu      sync.Mutex
	due     []ackDue
	stopped bool
}

// ackDue is an acknowledgement to retry.
type ackDue struct {
	ref inboxRef
	// lease is the item's session's: once it ends, another replica takes
	// the item over (nil: until the process stops).
	lease cluster.Lease
}

// ackRetryLimit bounds the acknowledgements waiting for a retry.
const ackRetryLimit = 4096

// ackTimeout bounds one retried Ack.
const ackTimeout = 5 * time.Second

func newAckRetries(inbox Inbox, log *slog.Logger) *ackRetries {
	return &ackRetries{inbox: inbox, log: log, wake: make(chan struct{}, 1)}
}

// add queues ref's acknowledgement for a retry while lease lives; false
// when it is not queued (too many wait, run has stopped, or a is nil).
func (a *ackRetries) add(ref inboxRef, lease cluster.Lease) bool {
	if a == nil {
		return false
	}
	a.mu.Lock()
	ok := !a.stopped && len(a.due) < ackRetryLimit
	if ok {
		a.due = append(a.due, ackDue{ref: ref, lease: lease})
	}
	a.mu.Unlock()
	if ok {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
	return ok
}

// pending returns how many acknowledgements wait for a retry.
func (a *ackRetries) pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.due)
}

// run retries the queued acknowledgements until ctx ends; then it drops
// them and queues nothing more.
func (a *ackRetries) run(ctx context.Context) {
	defer func() {
		a.mu.Lock()
		a.stopped, a.due = true, nil
		a.mu.Unlock()
	}()
	retryLoop(ctx, a.wake, a.retry)
}

// retryLoop runs retry once something wakes it, and again while it
// leaves something to retry: resyncFirst later, twice as long after each
// failure up to resyncMax. It returns when ctx ends.
func retryLoop(ctx context.Context, wake <-chan struct{}, retry func(ctx context.Context) (left int, failed bool)) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
		for wait := resyncFirst; ; {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			left, failed := retry(ctx)
			if left == 0 {
				break
			}
			if failed {
				wait = min(2*wait, resyncMax)
			} else {
				wait = resyncFirst
			}
		}
	}
}

// retry tries the queued acknowledgements, oldest first, up to the first
// that fails again (Redis still does not answer: the rest wait with it).
// It drops those whose lease ended and returns how many are left and
// whether one failed.
func (a *ackRetries) retry(ctx context.Context) (left int, failed bool) {
	a.mu.Lock()
	due := a.due
	a.due = nil
	a.mu.Unlock()
	var keep []ackDue
	for i, d := range due {
		if !leaseLive(d.lease) || leaseDone(d.lease) {
			a.log.Info("inbox: an acknowledgement given up: its session's lease ended, its next holder takes the item over", "key", d.ref.key, "id", d.ref.id)
			continue
		}
		actx, cancel := context.WithTimeout(ctx, ackTimeout)
		err := a.inbox.Ack(actx, d.ref.key, d.ref.id)
		cancel()
		if err != nil {
			a.log.Debug("inbox: ack again failed", "key", d.ref.key, "id", d.ref.id, "err", err)
			keep = append(keep, due[i:]...)
			failed = true
			break
		}
		a.log.Info("inbox: acknowledged after a failure", "key", d.ref.key, "id", d.ref.id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return 0, failed
	}
	a.due = append(keep, a.due...)
	return len(a.due), failed
}
