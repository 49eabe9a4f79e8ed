package telegram

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// A poll under a lease is cut to end on Telegram's side before the lease
// may pass on; too close to the lease's end, nothing is polled.
func TestPollWindow(t *testing.T) {
	p := &poller{timeout: 50 * time.Second}
	for _, tc := range []struct {
		name string
		held func() time.Duration
		want time.Duration
		ok   bool
	}{
		{"no lease", nil, 50 * time.Second, true},
		{"a long lease", func() time.Duration { return 2 * time.Minute }, 50 * time.Second, true},
		{"a 15 s lease just renewed", func() time.Duration { return 14700 * time.Millisecond }, 14 * time.Second, true},
		{"whole seconds only", func() time.Duration { return 10400 * time.Millisecond }, 9 * time.Second, true},
		{"under a second left", func() time.Duration { return 900 * time.Millisecond }, 0, true},
		{"too close to the end", func() time.Duration { return 400 * time.Millisecond }, 0, false},
		{"past its end", func() time.Duration { return -time.Second }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := p.window(tc.held)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("window = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestPollsEndBeforeTheLeaseMayPass runs the poller under a lease that is
// not renewed: every getUpdates asks Telegram to hold the poll no longer
// than the lease is sure to be held (minus the transit allowance), and no
// poll is sent once the lease is too close to its end. With the 50 s
// poll timeout alone, the first poll would stay open 50 s: a replica that
// froze (or lost Redis) with it open would poll at the same time as the
// next leader.
func TestPollsEndBeforeTheLeaseMayPass(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.PollTimeout = 50 * time.Second })
	var deadline atomic.Int64
	deadline.Store(time.Now().Add(3200 * time.Millisecond).UnixNano())
	held := func() time.Duration { return time.Until(time.Unix(0, deadline.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.a.RunBounded(ctx, func(context.Context, chat.Inbound) error { return nil }, held)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	end := time.Unix(0, deadline.Load())
	// Past the deadline, with room for a late poll to show.
	time.Sleep(time.Until(end) + time.Second)
	calls := h.srv.Calls("getUpdates")
	if len(calls) == 0 {
		t.Fatal("no getUpdates had ended a second after the lease's end: a poll stayed open past it")
	}
	for i, c := range calls {
		secs, err := strconv.Atoi(c.Params["timeout"])
		if err != nil {
			t.Fatalf("getUpdates %d: timeout %q", i, c.Params["timeout"])
		}
		if last := c.Time.Add(time.Duration(secs) * time.Second); last.After(end) {
			t.Errorf("getUpdates %d at %v asked Telegram to hold it %d s, past the lease's end (%v)", i, c.Time.Sub(end), secs, end.Sub(c.Time))
		}
		if c.Time.After(end.Add(-pollTransit)) {
			t.Errorf("getUpdates %d sent %v before the lease's end, inside its transit allowance", i, end.Sub(c.Time))
		}
	}
	if first, _ := strconv.Atoi(calls[0].Params["timeout"]); first < 2 {
		t.Errorf("the first poll, with 3.2 s of lease left, waits %d s on Telegram's side; want 2 (a long poll while the lease allows)", first)
	}
}
