// Package backoff computes the waits between retries (an exponential
// delay with a cap, and jitter) and waits them out under a context. It
// keeps no state: callers count their own attempts.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exp returns base·2^(n-1), the wait before retry number n (1-based; n
// below 1 counts as 1), capped at limit; limit <= 0 means no cap. A wait
// that would overflow time.Duration is the cap, or the longest Duration
// when there is none. base <= 0 returns 0.
func Exp(base time.Duration, n int, limit time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	ceiling := limit
	if ceiling <= 0 {
		ceiling = time.Duration(1<<63 - 1)
	}
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		if d > ceiling/2 {
			d = ceiling
			break
		}
		d *= 2
	}
	return min(d, ceiling)
}

// Jitter returns d plus a random extra of up to a fifth of d, so that
// clients that failed together do not retry together. d <= 0 returns d.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// Sleep waits d, or until ctx ends and then returns ctx.Err(). A d <= 0
// returns at once (nil, or ctx.Err() when ctx has already ended).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
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
