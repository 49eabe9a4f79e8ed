package clustertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// Clock is a manual clock for harnesses of in-process implementations:
// pass Now to the implementation and Advance to the suite.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock { return &Clock{now: time.Unix(1_700_000_000, 0)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Dedupe is what RunDedupeTests drives: the gateway's cluster.Dedupe.
type Dedupe = cluster.Dedupe

// DedupeHarness opens dedupers for RunDedupeTests.
type DedupeHarness struct {
	// Open returns a dedupe on fresh storage that remembers at least max
	// keys for ttl each, and a function that lets its time pass.
	Open func(t *testing.T, ttl time.Duration, max int) (Dedupe, func(time.Duration))
}

// RunDedupeTests runs the dedupe suite.
func RunDedupeTests(t *testing.T, h DedupeHarness) {
	ctx := t.Context()
	// seen asks about one delivery of key and, when it is new, takes it
	// as the gateway does: a Committer's key is committed once the event
	// is taken.
	seen := func(t *testing.T, d Dedupe, key string) bool {
		t.Helper()
		ok, err := d.Seen(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if c, isC := d.(cluster.Committer); isC && !ok {
			if err := c.Commit(ctx, key); err != nil {
				t.Fatal(err)
			}
		}
		return ok
	}
	t.Run("SecondDeliveryIsADuplicate", func(t *testing.T) {
		d, _ := h.Open(t, time.Hour, 100)
		if seen(t, d, "k") {
			t.Fatal("a new key was reported seen")
		}
		for i := range 2 {
			if !seen(t, d, "k") {
				t.Fatalf("redelivery %d was not reported seen", i+1)
			}
		}
		if seen(t, d, "other") {
			t.Fatal("keys are not independent")
		}
	})
	t.Run("KeyExpiresAfterTTL", func(t *testing.T) {
		d, advance := h.Open(t, time.Minute, 100)
		seen(t, d, "k")
		advance(30 * time.Second)
		if !seen(t, d, "k") {
			t.Fatal("key forgotten within its TTL")
		}
		advance(2 * time.Minute)
		if seen(t, d, "k") {
			t.Fatal("key survived its TTL")
		}
	})
	t.Run("InFlightUntilCommitted", func(t *testing.T) {
		d, _ := h.Open(t, time.Hour, 100)
		c, ok := d.(cluster.Committer)
		if !ok {
			t.Skip("not a Committer: Seen records a key for good")
		}
		if dup, err := d.Seen(ctx, "k"); err != nil || dup {
			t.Fatalf("first delivery: %v, %v; want new", dup, err)
		}
		for i := range 2 {
			if dup, err := d.Seen(ctx, "k"); !errors.Is(err, cluster.ErrInFlight) {
				t.Fatalf("delivery %d while the first is not committed: %v, %v; want ErrInFlight", i+2, dup, err)
			}
		}
		if err := c.Commit(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if dup, err := d.Seen(ctx, "k"); err != nil || !dup {
			t.Fatalf("delivery after the commit: %v, %v; want a duplicate", dup, err)
		}
		// A key committed without a Seen (an event replayed from the
		// inbox) is recorded as well.
		if err := c.Commit(ctx, "replayed"); err != nil {
			t.Fatal(err)
		}
		if dup, err := d.Seen(ctx, "replayed"); err != nil || !dup {
			t.Fatalf("delivery of a committed key: %v, %v; want a duplicate", dup, err)
		}
		// A pending key forgotten (its event refused) is new again.
		if _, err := d.Seen(ctx, "refused"); err != nil {
			t.Fatal(err)
		}
		if err := d.Forget(ctx, "refused"); err != nil {
			t.Fatal(err)
		}
		if dup, err := d.Seen(ctx, "refused"); err != nil || dup {
			t.Fatalf("redelivery of a refused event: %v, %v; want new", dup, err)
		}
	})
	t.Run("ForgetAcceptsTheNextDelivery", func(t *testing.T) {
		d, _ := h.Open(t, time.Hour, 100)
		seen(t, d, "k")
		if err := d.Forget(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		if seen(t, d, "k") {
			t.Fatal("Forget did not forget")
		}
		if err := d.Forget(ctx, "never-seen"); err != nil {
			t.Fatalf("Forget of an unknown key: %v", err)
		}
	})
	t.Run("CapacityKeepsTheLatestKeys", func(t *testing.T) {
		const max = 50
		d, _ := h.Open(t, time.Hour, max)
		for i := range 3 * max {
			seen(t, d, fmt.Sprint("k", i))
		}
		for i := 2 * max; i < 3*max; i++ {
			if !seen(t, d, fmt.Sprint("k", i)) {
				t.Fatalf("key %d of the latest %d forgotten", i, max)
			}
		}
	})
}

// Budget is what RunBudgetTests drives: the inbound per-sender budget
// (cluster.Budget).
type Budget = cluster.Budget

// BudgetHarness opens budgets for RunBudgetTests.
type BudgetHarness struct {
	// Open returns a budget on fresh storage allowing rate tokens per
	// second with burst per key, and a function that lets its time pass.
	Open func(t *testing.T, rate float64, burst int) (Budget, func(time.Duration))
}

// RunBudgetTests runs the inbound budget suite.
func RunBudgetTests(t *testing.T, h BudgetHarness) {
	reserve := func(t *testing.T, b Budget, key string) time.Duration {
		t.Helper()
		d, err := b.Reserve(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("BurstThenWait", func(t *testing.T) {
		b, _ := h.Open(t, 1, 3)
		for i := range 3 {
			if d := reserve(t, b, "k"); d != 0 {
				t.Fatalf("reserve %d of the burst waits %v", i, d)
			}
		}
		if d := reserve(t, b, "k"); d <= 0 || d > time.Second {
			t.Fatalf("reserve past the burst waits %v, want (0, 1s]", d)
		}
		if d := reserve(t, b, "k"); d <= time.Second {
			t.Fatalf("a sender who keeps sending waits only %v", d)
		}
		if d := reserve(t, b, "other"); d != 0 {
			t.Fatal("keys share a bucket")
		}
	})
	t.Run("Refill", func(t *testing.T) {
		b, advance := h.Open(t, 2, 2)
		reserve(t, b, "k")
		reserve(t, b, "k")
		advance(500 * time.Millisecond) // one token back
		if d := reserve(t, b, "k"); d != 0 {
			t.Fatalf("after a refill of one token: wait %v", d)
		}
		if d := reserve(t, b, "k"); d == 0 {
			t.Fatal("refilled more than the elapsed time allows")
		}
		advance(time.Hour) // refill stops at the burst
		for i := range 2 {
			if d := reserve(t, b, "k"); d != 0 {
				t.Fatalf("reserve %d after a long pause waits %v", i, d)
			}
		}
		if d := reserve(t, b, "k"); d == 0 {
			t.Fatal("a long pause refilled beyond the burst")
		}
	})
}

// Rates is what RunRatesTests drives: the outbound pacing store of the
// chat adapters (tokenbucket.Rates), and Take.
type Rates interface {
	tokenbucket.Rates
	Take(ctx context.Context, key string, perSec float64, burst int) (time.Duration, error)
}

// RatesHarness opens outbound pacing stores for RunRatesTests.
type RatesHarness struct {
	// Open returns an empty budget on fresh storage, and a function that
	// lets its time pass.
	Open func(t *testing.T) (Rates, func(time.Duration))
}

// RunRatesTests runs the outbound pacing suite.
func RunRatesTests(t *testing.T, h RatesHarness) {
	take := func(t *testing.T, r Rates, key string, perSec float64, burst int) time.Duration {
		t.Helper()
		d, err := r.Take(t.Context(), key, perSec, burst)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("BurstThenWaitTakesNothing", func(t *testing.T) {
		r, advance := h.Open(t)
		for i := range 3 {
			if d := take(t, r, "chat", 1, 3); d != 0 {
				t.Fatalf("take %d of the burst waits %v", i, d)
			}
		}
		d1 := take(t, r, "chat", 1, 3)
		d2 := take(t, r, "chat", 1, 3)
		if d1 <= 0 || d2 <= 0 || d2 > d1 {
			t.Fatalf("waits past the burst: %v then %v; want positive and not growing (a refused take takes nothing)", d1, d2)
		}
		advance(d1)
		if d := take(t, r, "chat", 1, 3); d != 0 {
			t.Fatalf("after waiting the wait it was given: %v more", d)
		}
		if d := take(t, r, "other", 1, 3); d != 0 {
			t.Fatal("keys share a bucket")
		}
	})
	t.Run("RefillUpToBurst", func(t *testing.T) {
		r, advance := h.Open(t)
		for range 2 {
			take(t, r, "g", 20.0/60, 2) // 20 a minute
		}
		if take(t, r, "g", 20.0/60, 2) == 0 {
			t.Fatal("a third take within the burst of 2")
		}
		advance(3 * time.Second)
		if d := take(t, r, "g", 20.0/60, 2); d != 0 {
			t.Fatalf("one token after 3 s at 20/min: wait %v", d)
		}
		advance(time.Hour)
		for i := range 2 {
			if d := take(t, r, "g", 20.0/60, 2); d != 0 {
				t.Fatalf("take %d after a long pause waits %v", i, d)
			}
		}
		if take(t, r, "g", 20.0/60, 2) == 0 {
			t.Fatal("a long pause refilled beyond the burst")
		}
	})
	takeAll := func(t *testing.T, r Rates, buckets ...tokenbucket.Bucket) (time.Duration, int) {
		t.Helper()
		d, which, err := r.TakeAll(t.Context(), "", buckets)
		if err != nil {
			t.Fatal(err)
		}
		return d, which
	}
	t.Run("TakeAllIsAllOrNothing", func(t *testing.T) {
		r, advance := h.Open(t)
		chat := tokenbucket.Bucket{Key: "bot/chat/1", PerSec: 1, Burst: 1}
		global := tokenbucket.Bucket{Key: "bot/global", PerSec: 1, Burst: 3}
		if d, _ := takeAll(t, r, chat, global); d != 0 {
			t.Fatalf("first call of both buckets waits %v", d)
		}
		d, which := takeAll(t, r, chat, global)
		if d <= 0 || which != 0 {
			t.Fatalf("second call with the chat bucket empty: wait %v, bucket %d; want a wait asked by bucket 0", d, which)
		}
		// The refused call took nothing from the global bucket: two of
		// its three tokens are left.
		for i := range 2 {
			if d := take(t, r, global.Key, global.PerSec, global.Burst); d != 0 {
				t.Fatalf("global take %d after a refused call waits %v: the refused call took a token", i, d)
			}
		}
		if take(t, r, global.Key, global.PerSec, global.Burst) == 0 {
			t.Fatal("the global bucket granted a fourth token of a burst of 3")
		}
		advance(2 * time.Second)
		if d, which := takeAll(t, r, chat, global, tokenbucket.Bucket{Key: "bot/free", PerSec: 0}); d != 0 {
			t.Fatalf("after both refilled, with an unlimited bucket: wait %v (bucket %d)", d, which)
		}
	})
	t.Run("TakeAllNamesTheLongestWait", func(t *testing.T) {
		r, _ := h.Open(t)
		fast := tokenbucket.Bucket{Key: "bot/fast", PerSec: 10, Burst: 1}
		slow := tokenbucket.Bucket{Key: "bot/slow", PerSec: 0.1, Burst: 1}
		takeAll(t, r, fast, slow)
		d, which := takeAll(t, r, fast, slow)
		if which != 1 || d < 9*time.Second {
			t.Fatalf("both empty: wait %v asked by bucket %d; want the slow one's (~11 s, bucket 1)", d, which)
		}
	})
	t.Run("ConcurrentTakesStayInBudget", func(t *testing.T) {
		r, _ := h.Open(t)
		const burst = 5
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			granted int
		)
		for range 4 * burst {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d, err := r.Take(t.Context(), "bot", 0.001, burst)
				if err != nil {
					t.Error(err)
					return
				}
				if d == 0 {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if granted != burst {
			t.Fatalf("%d concurrent takes granted, want the burst of %d", granted, burst)
		}
	})
}
