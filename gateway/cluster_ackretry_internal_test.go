package gateway

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
)

// ackInbox is an inbox whose acknowledgements fail while failing is set;
// it records the ones that passed and counts the attempts.
type ackInbox struct {
	Inbox // only Ack is called

	mu       sync.Mutex
	failing  bool
	attempts int
	acked    map[inboxRef]bool
}

func (ib *ackInbox) Ack(_ context.Context, key, id string) error {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.attempts++
	if ib.failing {
		return errors.New("no answer")
	}
	if ib.acked == nil {
		ib.acked = map[inboxRef]bool{}
	}
	ib.acked[inboxRef{key: key, id: id}] = true
	return nil
}

func (ib *ackInbox) state() (attempts int, acked map[inboxRef]bool) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	out := map[inboxRef]bool{}
	for r := range ib.acked {
		out[r] = true
	}
	return ib.attempts, out
}

func (ib *ackInbox) fail(on bool) {
	ib.mu.Lock()
	defer ib.mu.Unlock()
	ib.failing = on
}

// doneLease is a lease whose end the test decides.
type doneLease struct {
	done chan struct{}
	once sync.Once
}

func (l *doneLease) Fence() int64                  { return 1 }
func (l *doneLease) Done() <-chan struct{}         { return l.done }
func (l *doneLease) Release(context.Context) error { l.once.Do(func() { close(l.done) }); return nil }

var _ cluster.Lease = (*doneLease)(nil)

// eventually waits, with a generous deadline, for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatal(what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A failed acknowledgement is tried again until the inbox answers; it is
// given up when its session's lease ends (its next holder takes the item
// over) and when the process stops; at most ackRetryLimit wait.
func TestAckRetries(t *testing.T) {
	t.Parallel()
	ref := inboxRef{key: "k", id: "1-1"}
	tests := []struct {
		name string
		run  func(t *testing.T, a *ackRetries, ib *ackInbox, lease *doneLease, stop func())
	}{
		{"acknowledged once the inbox answers", func(t *testing.T, a *ackRetries, ib *ackInbox, lease *doneLease, _ func()) {
			a.add(ref, lease)
			eventually(t, "no retry while the inbox fails", func() bool { n, _ := ib.state(); return n >= 2 })
			ib.fail(false)
			eventually(t, "not acknowledged once the inbox answers", func() bool { _, acked := ib.state(); return acked[ref] })
			eventually(t, "still queued after its ack", func() bool { return a.pending() == 0 })
		}},
		{"given up when the lease ends", func(t *testing.T, a *ackRetries, ib *ackInbox, lease *doneLease, _ func()) {
			a.add(ref, lease)
			_ = lease.Release(t.Context())
			eventually(t, "still queued after its lease ended", func() bool { return a.pending() == 0 })
			if _, acked := ib.state(); acked[ref] {
				t.Fatal("acknowledged while the inbox fails")
			}
		}},
		{"given up when the process stops", func(t *testing.T, a *ackRetries, ib *ackInbox, lease *doneLease, stop func()) {
			a.add(ref, lease)
			stop()
			if a.pending() != 0 || a.add(ref, lease) {
				t.Fatal("queued after run stopped")
			}
		}},
		{"bounded", func(t *testing.T, a *ackRetries, ib *ackInbox, lease *doneLease, stop func()) {
			stop()
			b := newAckRetries(ib, slog.New(slog.DiscardHandler)) // not running: nothing leaves
			for range ackRetryLimit {
				if !b.add(ref, lease) {
					t.Fatal("refused below the limit")
				}
			}
			if b.add(ref, lease) {
				t.Fatal("queued beyond the limit")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ib := &ackInbox{failing: true}
			a := newAckRetries(ib, slog.New(slog.DiscardHandler))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); a.run(ctx) }()
			stop := func() { cancel(); <-done }
			defer stop()
			tc.run(t, a, ib, &doneLease{done: make(chan struct{})}, stop)
		})
	}
}
