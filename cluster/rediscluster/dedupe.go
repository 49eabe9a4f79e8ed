package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Dedupe drops redelivered platform events for every replica at once: a
// key is remembered with SET NX PX for its TTL. Redis expires the keys,
// so the set is bounded by the traffic of one TTL.
type Dedupe struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewDedupe remembers keys for ttl (at least a millisecond).
func NewDedupe(rdb redis.UniversalClient, opts Options, ttl time.Duration) *Dedupe {
	return &Dedupe{rdb: rdb, prefix: opts.KeyPrefix() + "dedupe:", ttl: max(ttl, time.Millisecond)}
}

// Seen records key and reports whether it was already recorded within the
// TTL, by this replica or another.
func (d *Dedupe) Seen(ctx context.Context, key string) (bool, error) {
	err := d.rdb.SetArgs(ctx, d.prefix+key, "1", redis.SetArgs{Mode: "NX", TTL: d.ttl}).Err()
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, redis.Nil):
		return true, nil
	default:
		return false, fmt.Errorf("rediscluster: dedupe: %w", err)
	}
}

// Forget removes key, so a redelivery is accepted again.
func (d *Dedupe) Forget(ctx context.Context, key string) error {
	if err := d.rdb.Del(ctx, d.prefix+key).Err(); err != nil {
		return fmt.Errorf("rediscluster: dedupe forget: %w", err)
	}
	return nil
}
