package rediscluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
)

// seenScript records KEYS[1] as pending ("~" and ARGV[1], a token of
// this call) for ARGV[2] ms unless it is there, and returns 0 when it
// recorded it, 1 when it was there committed (a duplicate: a value
// without "~", or with an item's id after a space) and 2 when another
// call's pending value is there (in flight). A key holding this call's
// own value is this call run again (the client retried after losing the
// answer): not a duplicate.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var seenScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local mine = '~' .. ARGV[1]
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], mine, 'PX', ARGV[2])
  return 0
end
if v == mine then return 0 end
if string.sub(v, 1, 1) == '~' and not string.find(v, ' ', 1, true) then return 2 end
return 1
`)
})

// commitScript records KEYS[1] for ARGV[1] ms: a pending value loses its
// "~" (kept otherwise: a committed key stays as it is, TTL renewed), an
// absent key is recorded as "-".
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var commitScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  v = '-'
elseif string.sub(v, 1, 1) == '~' and not string.find(v, ' ', 1, true) then
  v = string.sub(v, 2)
end
redis.call('SET', KEYS[1], v, 'PX', ARGV[1])
return 1
`)
})

// DedupePending is how long a key Seen recorded lives until its event is
// committed (NewDedupe): far longer than the steps between (the access
// check, a thread opened, the admission), short enough that a platform
// still delivers a refused event again after it (Slack: about 1 and 5
// minutes later; Telegram: until the update is confirmed).
const DedupePending = 30 * time.Second

// Dedupe drops redelivered platform events for every replica at once: a
// key is remembered (set if absent, with a TTL) for its TTL. Redis
// expires the keys, so the set is bounded by the traffic of one TTL.
//
// A key Seen records is pending (cluster.Committer): it lives for the
// pending time only until its event is committed, by the admission that
// enqueues the event's item (Admit with Admission.Seen) or by Commit. So
// the key of an event whose replica died before it enqueued the event or
// forgot the key expires soon, and the platform's redelivery is taken;
// while it is pending, Seen answers cluster.ErrInFlight.
//
// Its keys (P{inbox}:d:K) share the inbox's hash tag: the admission script
// (admit.go) answers the dedupe, the sender's budget and the enqueue in
// one round trip, and a Redis Cluster runs a script only over keys of one
// slot. The slot held every inbox key already, so every inbound event
// already wrote to it; the dedupe adds no new hot slot.
type Dedupe struct {
	rdb     redis.UniversalClient
	prefix  string
	ttl     time.Duration
	pending time.Duration
}

// NewDedupe remembers keys for ttl (at least a millisecond), and keys not
// committed for DedupePending (at most ttl).
func NewDedupe(rdb redis.UniversalClient, opts Options, ttl time.Duration) *Dedupe {
	return NewDedupePending(rdb, opts, ttl, DedupePending)
}

// NewDedupePending is NewDedupe with keys not committed remembered for
// pending (at least a millisecond, at most ttl).
func NewDedupePending(rdb redis.UniversalClient, opts Options, ttl, pending time.Duration) *Dedupe {
	ttl = max(ttl, time.Millisecond)
	return &Dedupe{rdb: rdb, prefix: opts.KeyPrefix() + "{inbox}:d:", ttl: ttl, pending: min(max(pending, time.Millisecond), ttl)}
}

// Seen records key, pending, and reports whether it was already recorded
// and committed within the TTL, by this replica or another; a key another
// delivery recorded and has not committed is an error wrapping
// cluster.ErrInFlight. Any other error may come after Redis recorded key
// (a lost answer): a caller that refuses the event then Forgets key, or
// the platform's redelivery is in flight until the key expires.
func (d *Dedupe) Seen(ctx context.Context, key string) (bool, error) {
	token, err := newToken()
	if err != nil {
		return false, err
	}
	n, err := seenScript().Run(ctx, d.rdb, []string{d.prefix + key}, token, d.pending.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("rediscluster: dedupe: %w", err)
	}
	return seenAnswer(n)
}

// seenAnswer reads seenScript's answer.
func seenAnswer(n int64) (bool, error) {
	if n == 2 {
		return false, fmt.Errorf("rediscluster: dedupe: %w", cluster.ErrInFlight)
	}
	return n == 1, nil
}

// Commit records key for the TTL (cluster.Committer): the pending key of
// an event handled without an inbox item, or the key of an event replayed
// from the inbox.
func (d *Dedupe) Commit(ctx context.Context, key string) error {
	if err := commitScript().Run(ctx, d.rdb, []string{d.prefix + key}, d.ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("rediscluster: dedupe commit: %w", err)
	}
	return nil
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
