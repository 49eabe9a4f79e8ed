package rediscluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// seenScript records KEYS[1] with the value ARGV[1] (a token of this
// call) for ARGV[2] ms unless it is there, and returns 1 when it was
// there already. A key holding this call's own token is this call run
// again (the client retried after losing the answer): not a duplicate.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var seenScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 0
end
if v == ARGV[1] then return 0 end
return 1
`)
})

// Dedupe drops redelivered platform events for every replica at once: a
// key is remembered (set if absent, with a TTL) for its TTL. Redis
// expires the keys, so the set is bounded by the traffic of one TTL.
//
// Its keys (P{inbox}:d:K) share the inbox's hash tag: the admission script
// (admit.go) answers the dedupe, the sender's budget and the enqueue in
// one round trip, and a Redis Cluster runs a script only over keys of one
// slot. The slot held every inbox key already, so every inbound event
// already wrote to it; the dedupe adds no new hot slot.
type Dedupe struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewDedupe remembers keys for ttl (at least a millisecond).
func NewDedupe(rdb redis.UniversalClient, opts Options, ttl time.Duration) *Dedupe {
	return &Dedupe{rdb: rdb, prefix: opts.KeyPrefix() + "{inbox}:d:", ttl: max(ttl, time.Millisecond)}
}

// Seen records key and reports whether it was already recorded within the
// TTL, by this replica or another. An error may come after Redis recorded
// key (a lost answer): a caller that refuses the event then Forgets key,
// or the platform's redelivery is a duplicate.
func (d *Dedupe) Seen(ctx context.Context, key string) (bool, error) {
	token, err := newToken()
	if err != nil {
		return false, err
	}
	n, err := seenScript().Run(ctx, d.rdb, []string{d.prefix + key}, token, d.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("rediscluster: dedupe: %w", err)
	}
	return n == 1, nil
}

// forgetScript deletes the dedupe key KEYS[1] unless it records an
// inbox item's id ("token id", written by the admission that enqueued
// the event's item): it returns 1 when it deleted it.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var forgetScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.find(v, ' ', 1, true) then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)
})

// Forget removes key, so a redelivery is accepted again: the caller
// refused its event (a failed enqueue, an admission whose answer never
// came). A key an admission recorded its event's item in (Admit) stays:
// the item is in the inbox and will be answered (a refusal whose answer
// was lost after the script ran), so the redelivery is a duplicate
// rather than a second item.
func (d *Dedupe) Forget(ctx context.Context, key string) error {
	if err := forgetScript().Run(ctx, d.rdb, []string{d.prefix + key}).Err(); err != nil {
		return fmt.Errorf("rediscluster: dedupe forget: %w", err)
	}
	return nil
}
