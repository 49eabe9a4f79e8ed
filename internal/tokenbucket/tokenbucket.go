// Package tokenbucket paces outbound calls in this process: token buckets
// by key (what a platform adapter uses when no shared store, the
// cluster's Rates, is injected) and the context-aware wait a pace asks
// for.
package tokenbucket

import (
	"context"
	"math"
	"sync"
	"time"
)

// Rates holds the token buckets that pace a platform adapter's outbound
// calls (the adapters' Config.Rates). The default keeps them in this
// process (Local, cluster.Rates); in cluster mode the replicas share one
// (rediscluster.Rates), so a bot's pace is not spent once per replica.
type Rates interface {
	// TakeAll takes one token from each of buckets (each refilling at its
	// PerSec up to its Burst), all or none, and returns 0; when one has
	// none, or pause ("" for none) is paused in a store the replicas share,
	// it takes nothing and returns how long until it may, and the index of
	// the bucket that asked for the wait (-1: the pause). One call of a
	// shared store is one round trip.
	TakeAll(ctx context.Context, pause string, buckets []Bucket) (time.Duration, int, error)
}

// SharedPause is a Rates whose pause windows every replica sees (cluster
// mode's Redis rates): a 429 answered to one replica makes the paused
// calls on every replica wait out its retry-after. Rates without it pause
// only this process.
type SharedPause interface {
	// Pause makes key wait d on every replica, unless it already waits
	// longer: the store's TakeAll with key as its pause waits it out.
	Pause(ctx context.Context, key string, d time.Duration) error
}

// maxBuckets bounds the buckets a Local keeps: beyond it, full buckets
// (which grant the same as a new one) are dropped.
const maxBuckets = 4096

// Local is a set of token buckets by key. It is safe for concurrent use.
type Local struct {
	margin  float64
	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
}

// NewLocal returns an empty set. A wait it returns is lengthened by margin
// times the refill interval, so that network jitter between two calls
// cannot bring them to the platform closer together than the pacing
// allows (0.1: a tenth).
func NewLocal(margin float64) *Local { return NewLocalClock(margin, time.Now) }

// NewLocalClock is NewLocal with its time read from now (tests pass a
// clock they move).
func NewLocalClock(margin float64, now func() time.Time) *Local {
	return &Local{margin: margin, now: now, buckets: map[string]*bucket{}}
}

// Bucket names a token bucket and its pace: one of the buckets a call
// takes a token from (TakeAll).
type Bucket struct {
	Key    string
	PerSec float64 // tokens a second; <= 0: no limit
	Burst  int
}

// Take takes one token from key's bucket, which refills at perSec tokens a
// second up to burst, and returns 0; when the bucket has no token it takes
// nothing and returns how long until it will have one. perSec <= 0 means
// no limit. It never fails.
func (r *Local) Take(ctx context.Context, key string, perSec float64, burst int) (time.Duration, error) {
	d, _, err := r.TakeAll(ctx, "", []Bucket{{Key: key, PerSec: perSec, Burst: burst}})
	return d, err
}

// TakeAll takes one token from each of buckets, all or none: when one of
// them has no token it takes nothing and returns the longest wait and the
// index of the bucket that asked for it. pause names a pause window, which
// only stores shared by replicas keep (a Local has none: it is ignored).
// It never fails.
func (r *Local) TakeAll(_ context.Context, pause string, buckets []Bucket) (time.Duration, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var wait time.Duration
	which := -1
	for i, bs := range buckets {
		if bs.PerSec <= 0 {
			continue
		}
		b := r.bucket(now, bs)
		if b.tokens < 1 {
			if d := time.Duration((1 + r.margin - b.tokens) / b.rate * float64(time.Second)); d > wait {
				wait, which = d, i
			}
		}
	}
	if wait > 0 {
		return wait, which, nil
	}
	for _, bs := range buckets {
		if bs.PerSec > 0 {
			r.buckets[bs.Key].tokens--
		}
	}
	return 0, -1, nil
}

// bucket returns bs's bucket refilled to now (full when new), at the pace
// bs names.
func (r *Local) bucket(now time.Time, bs Bucket) *bucket {
	full := float64(max(bs.Burst, 1))
	b := r.buckets[bs.Key]
	if b == nil {
		if len(r.buckets) >= maxBuckets {
			for k, old := range r.buckets {
				if old.refill(now); old.tokens >= old.burst {
					delete(r.buckets, k)
				}
			}
		}
		b = &bucket{tokens: full, last: now}
		r.buckets[bs.Key] = b
	}
	b.rate, b.burst = bs.PerSec, full
	b.refill(now)
	return b
}

// bucket refills rate tokens per second up to burst.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func (b *bucket) refill(now time.Time) {
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// Wait waits for d, the wait a bucket asked for, or until ctx ends, and
// then returns ctx's error.
func Wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
