package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
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
	real  *cluster.LocalLocker
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

// A command registration that fails is tried again in the background with
// back-off until the platform takes it; the log says so once, and once
// more when it worked, however many attempts it took.
func TestRegisterCommandsRetries(t *testing.T) {
	ad := chattest.New()
	ad.FailNext(chattest.MethodCommands, 4, errors.New("telegram: setMyCommands: dial tcp: connection refused"))
	var logs strings.Builder
	var waits []time.Duration
	specs := []chat.CommandSpec{{Name: "help", Description: "Show the commands"}}
	ar := &adapterRunner{
		adapters: map[chat.Platform]chat.Adapter{ad.Platform(): ad},
		log:      slog.New(slog.NewTextHandler(&logs, nil)),
		commands: func() []chat.CommandSpec { return specs },
		wait: func(_ context.Context, d time.Duration) bool {
			waits = append(waits, d)
			return true
		},
	}
	var wg sync.WaitGroup
	ar.registerCommands(t.Context(), &wg)
	wg.Wait()
	if !slices.Equal(ad.Commands(), specs) {
		t.Fatalf("commands %v, want %v", ad.Commands(), specs)
	}
	s := time.Second
	if want := []time.Duration{5 * s, 10 * s, 20 * s, 40 * s}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "retrying in the background") || !strings.Contains(out, "commands registered") {
		t.Errorf("logs:\n%s", out)
	}
	if strings.Contains(out, "telegram: telegram:") {
		t.Errorf("the platform is named twice:\n%s", out)
	}
}
