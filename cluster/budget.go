package cluster

import (
	"context"
	"sync"
	"time"
)

// Budget is a set of token buckets keyed by string (a chat, a bot token, a
// Slack method), for outbound rate limits.
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
}

// NewBudget allows rate events per second with the given burst, per key.
func NewBudget(rate float64, burst int) *Budget {
	return &Budget{rate: rate, burst: float64(burst), now: time.Now, buckets: map[string]*bucket{}}
}

// Reserve takes one token for key and returns how long the caller must wait
// before using it (0 when available now).
func (b *Budget) Reserve(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	bk, ok := b.buckets[key]
	if !ok {
		bk = &bucket{tokens: b.burst, last: now}
		b.buckets[key] = bk
	}
	bk.tokens += now.Sub(bk.last).Seconds() * b.rate
	if bk.tokens > b.burst {
		bk.tokens = b.burst
	}
	bk.last = now
	bk.tokens--
	if bk.tokens >= 0 {
		return 0
	}
	return time.Duration(-bk.tokens / b.rate * float64(time.Second))
}

// Wait blocks until key has a token or ctx ends.
func (b *Budget) Wait(ctx context.Context, key string) error {
	d := b.Reserve(key)
	if d <= 0 {
		return nil
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
