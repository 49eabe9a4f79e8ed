package cluster

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/tokenbucket"
)

// LocalBudget is a set of token buckets keyed by string (a sender, a chat),
// all with the same rate and burst: the inbound per-sender budget.
// Reserve takes a token even when the bucket is empty, so a sender who
// keeps sending keeps waiting longer.
type LocalBudget struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// refill adds the tokens earned since the bucket was last used, up to
// burst.
func (bk *bucket) refill(now time.Time, rate, burst float64) {
	bk.tokens = math.Min(burst, bk.tokens+now.Sub(bk.last).Seconds()*rate)
	bk.last = now
}

// NewBudget allows rate events per second with the given burst, per key.
func NewBudget(rate float64, burst int) *LocalBudget {
	return &LocalBudget{rate: rate, burst: float64(burst), now: time.Now, buckets: map[string]*bucket{}}
}

// Reserve takes one token for key and returns how long the caller must wait
// before using it (0 when available now). The in-process budget never
// fails.
func (b *LocalBudget) Reserve(_ context.Context, key string) (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	bk, ok := b.buckets[key]
	if !ok {
		bk = &bucket{tokens: b.burst, last: now}
		b.buckets[key] = bk
	}
	bk.refill(now, b.rate, b.burst)
	bk.tokens--
	if bk.tokens >= 0 {
		return 0, nil
	}
	return time.Duration(-bk.tokens / b.rate * float64(time.Second)), nil
}

// Wait blocks until key has a token or ctx ends.
func (b *LocalBudget) Wait(ctx context.Context, key string) error {
	d, err := b.Reserve(ctx, key)
	if err != nil || d <= 0 {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Rates is the in-process outbound pacing store of the chat adapters:
// token buckets keyed by string, each with the rate and burst its caller
// names (a Telegram chat, a whole bot). It implements the adapters' Rates
// (telegram.Rates); a Redis-backed one shares the same buckets between
// replicas. A wait it returns is lengthened by a tenth of the refill
// interval, so that jitter between two calls cannot bring them closer
// together than the budget allows. It keeps no pause windows (TakeAll
// ignores its pause: the adapters pause their own process) and never
// fails.
type Rates struct {
	*tokenbucket.Local
}

// NewRates returns an empty in-process outbound pacing store.
func NewRates() *Rates {
	return &Rates{Local: tokenbucket.NewLocal(rateMargin)}
}

// rateMargin lengthens a wait by a tenth of the refill interval.
const rateMargin = 0.1
