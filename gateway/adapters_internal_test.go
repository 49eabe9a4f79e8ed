package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
)

// refusingLocker refuses the first len(errs) Acquires with errs, in turn,
// then grants leases of a real local Locker.
type refusingLocker struct {
	errs  []error
	calls int
	real  *cluster.Locker
}

func (l *refusingLocker) Acquire(ctx context.Context, key string, minFence int64) (cluster.Lease, error) {
	l.calls++
	if l.calls <= len(l.errs) {
		return nil, l.errs[l.calls-1]
	}
	return l.real.Acquire(ctx, key, minFence)
}

// oneShot is an adapter whose Run returns at once: runSingleton returns
// after its first grant.
type oneShot struct{ *chattest.Adapter }

func (oneShot) Run(context.Context, chat.Sink) error { return nil }

// A standby replica asks for a singleton adapter's lease every second for
// as long as another replica holds it: it takes over polling about a
// lease TTL after the holder died, however long it has been waiting (with
// the back-off kept for failures, TestClusterPollingLeader found a
// standby asking only every 30 s, so a killed leader's chat went
// unanswered past the test's 30 s). A lease store that fails is asked
// with back-off.
func TestSingletonStandbyAsksAtASteadyPace(t *testing.T) {
	repeat := func(err error, n int) []error {
		var errs []error
		for range n {
			errs = append(errs, err)
		}
		return errs
	}
	s := time.Second
	tests := []struct {
		name      string
		errs      []error
		wantWaits []time.Duration
	}{
		{"held by another replica", repeat(cluster.ErrLeaseHeld, 8), []time.Duration{s, s, s, s, s, s, s, s}},
		{"store unreachable", repeat(errors.New("dial tcp: connection refused"), 8), []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 30 * s, 30 * s, 30 * s}},
		{"held after failures", append(repeat(errors.New("dial tcp: connection refused"), 3), repeat(cluster.ErrLeaseHeld, 3)...), []time.Duration{s, 2 * s, 4 * s, s, s, s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			real, err := cluster.NewLocker(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var waits []time.Duration
			ar := &adapterRunner{
				locker: &refusingLocker{errs: tt.errs, real: real},
				log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
				wait: func(_ context.Context, d time.Duration) bool {
					waits = append(waits, d)
					return true
				},
			}
			if err := ar.runSingleton(t.Context(), oneShot{chattest.New()}, "adapter:test/poll"); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(waits, tt.wantWaits) {
				t.Fatalf("waits between asks = %v, want %v", waits, tt.wantWaits)
			}
		})
	}
}
