package cluster

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/tokenbucket"
)

// Budget is a set of token buckets keyed by string (a sender, a chat),
// all with the same rate and burst: the inbound per-sender budget.
// Reserve takes a token even when the bucket is empty, so a sender who
// keeps sending keeps waiting longer.
type Budget struct {
	mu      sync.Mutex
	rate    float64 // tokens per second
	burst   float64
	now     func() time.Time
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
	// rate and burst are the limits a Rates bucket was last used with.
	rate, burst float64
}

// refill adds the tokens earned since the bucket was last used, up to
// burst.
func (bk *bucket) refill(now time.Time, rate, burst float64) {
	bk.tokens = math.Min(burst, bk.tokens+now.Sub(bk.last).Seconds()*rate)
	bk.last = now
}

// NewBudget allows rate events per second with the given burst, per key.
func NewBudget(rate float64, burst int) *Budget {
	return &Budget{rate: rate, burst: float64(burst), now: time.Now, buckets: map[string]*bucket{}}
}

// Reserve takes one token for key and returns how long the caller must wait
// before using it (0 when available now). The in-process budget never
// fails.
func (b *Budget) Reserve(_ context.Context, key string) (time.Duration, error) {
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
func (b *Budget) Wait(ctx context.Context, key string) error {
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

// maxRateBuckets bounds the buckets Rates keeps: beyond it, full buckets
// (which would grant the same as a new one) are dropped.
const maxRateBuckets = 4096

// Rates is the in-process outbound pacing store of the chat adapters: token
// buckets keyed by string, each with the rate and burst its caller names
// (a Telegram chat, a whole bot). It implements the adapters' Rates (telegram.Rates);
// a Redis-backed one shares the same buckets between replicas.
type Rates struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*bucket
}

// NewRates returns an empty in-process outbound pacing store.
func NewRates() *Rates {
	return &Rates{now: time.Now, buckets: map[string]*bucket{}}
}

// Take takes one token from key's bucket, which refills at perSec tokens
// a second up to burst, and returns 0; when the bucket has no token it
// takes nothing and returns how long until it will have one. A wait is
// lengthened by a tenth of the refill interval so that jitter between
// two calls cannot bring them closer together than the budget allows.
// The in-process budget never fails.
func (r *Rates) Take(ctx context.Context, key string, perSec float64, burst int) (time.Duration, error) {
	d, _, err := r.TakeAll(ctx, "", []tokenbucket.Bucket{{Key: key, PerSec: perSec, Burst: burst}})
	return d, err
}

// TakeAll takes one token from each of buckets (distinct keys), all or
// none: when one of them has no token it takes nothing and returns the
// longest wait and the index of the bucket that asked for it. pause names
// a pause window, which the in-process store does not keep (the adapters
// pause their own process): it is ignored.
func (r *Rates) TakeAll(_ context.Context, pause string, buckets []tokenbucket.Bucket) (time.Duration, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var wait time.Duration
	which := -1
	for i, b := range buckets {
		if b.PerSec <= 0 {
			continue // no limit
		}
		bk := r.bucket(now, b)
		if bk.tokens < 1 {
			if d := time.Duration((1.1 - bk.tokens) / b.PerSec * float64(time.Second)); d > wait {
				wait, which = d, i
			}
		}
	}
	if wait > 0 {
		return wait, which, nil
	}
	for _, b := range buckets {
		if b.PerSec > 0 {
			r.buckets[b.Key].tokens--
		}
	}
	return 0, -1, nil
}

// bucket returns b's bucket refilled to now (full when new), at the pace
// b names.
func (r *Rates) bucket(now time.Time, b tokenbucket.Bucket) *bucket {
	full := float64(max(b.Burst, 1))
	bk, ok := r.buckets[b.Key]
	if !ok {
		if len(r.buckets) >= maxRateBuckets {
			r.dropFull(now)
		}
		bk = &bucket{tokens: full, last: now}
		r.buckets[b.Key] = bk
	}
	bk.rate, bk.burst = b.PerSec, full
	bk.refill(now, b.PerSec, full)
	return bk
}

// dropFull forgets the buckets that have refilled completely: a new
// bucket would grant exactly the same.
func (r *Rates) dropFull(now time.Time) {
	for k, bk := range r.buckets {
		if bk.tokens+now.Sub(bk.last).Seconds()*bk.rate >= bk.burst {
			delete(r.buckets, k)
		}
	}
}
