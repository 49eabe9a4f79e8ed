package rediscluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// bucketLua defines bucket(key, pause, rate, burst, now, mode, call), a
// token bucket in the hash key (fields t: tokens, l: last refill in µs),
// refilling at rate tokens a second up to burst. now is the time in µs,
// or "" for the Redis server's clock (shared by every replica). mode
// "reserve" always takes a token, going into debt; "take" takes one only
// when there is one; "refund" gives one back (up to burst). pause is a
// pause window: while it lives, "take" takes nothing and waits for it.
// It returns the wait in µs (0: the token is granted). The key expires
// once the bucket would be full again, which a new bucket is. call is a
// token of the call: the same call run again (the client retried after
// losing the answer) gets the same answer and takes nothing more. It is
// Lua source, so that the admission script (admit.go) shares it.
const bucketLua = `
local function bucket(key, pause, rate, burst, nowArg, mode, call)
  if redis.call('HGET', key, 'c') == call then
    return tonumber(redis.call('HGET', key, 'r'))
  end
  rate = tonumber(rate)
  burst = tonumber(burst)
  local now
  if nowArg == '' then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  else
    now = tonumber(nowArg)
  end
  if mode == 'take' then
    local p = redis.call('PTTL', pause)
    if p > 0 then return p * 1000 end
  end
  local v = redis.call('HMGET', key, 't', 'l')
  local tokens = tonumber(v[1])
  local last = tonumber(v[2])
  if tokens == nil or last == nil then
    tokens = burst
    last = now
  end
  if now > last then
    tokens = math.min(burst, tokens + (now - last) / 1000000 * rate)
    last = now
  end
  local wait = 0
  if mode == 'reserve' then
    tokens = tokens - 1
    if tokens < 0 then wait = math.ceil(-tokens / rate * 1000000) end
  elseif mode == 'refund' then
    tokens = math.min(burst, tokens + 1)
  elseif tokens >= 1 then
    tokens = tokens - 1
  else
    wait = math.ceil((1.1 - tokens) / rate * 1000000)
  end
  redis.call('HSET', key, 't', string.format('%.17g', tokens), 'l', string.format('%d', last), 'c', call, 'r', string.format('%d', wait))
  redis.call('PEXPIRE', key, math.ceil((burst - tokens) / rate * 1000) + 1000)
  return wait
end
`

// bucketScript runs bucket on KEYS[1] (the bucket) and KEYS[2] (its
// pause window) with ARGV rate, burst, now, mode and call token.
var bucketScript = redis.NewScript(bucketLua + `
return bucket(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
`)

// pauseScript sets the pause window KEYS[1] to ARGV[1] ms unless it
// already lasts longer.
var pauseScript = redis.NewScript(`
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 0
`)

// callToken names one bucket call, so that the call run again is
// recognised.
func callToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("rediscluster: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// clock is where a bucket reads the time: nil is the Redis server's
// clock, which every replica shares.
type clock func() time.Time

func (c clock) arg() string {
	if c == nil {
		return ""
	}
	return strconv.FormatInt(c().UnixMicro(), 10)
}

// Budget is the inbound per-sender budget shared by all replicas: a token
// bucket per key, all with one rate and burst. Reserve takes a token even
// when the bucket is empty, so a sender who keeps sending keeps waiting
// longer.
//
// Its keys (P{inbox}:b:K) share the inbox's hash tag, as the dedupe's do
// and for the same reason: the admission script takes the sender's token
// in the round trip that enqueues the message (admit.go).
type Budget struct {
	rdb    redis.UniversalClient
	prefix string
	rate   float64
	burst  int
	now    clock
}

// NewBudget allows rate events per second with the given burst, per key.
func NewBudget(rdb redis.UniversalClient, opts Options, rate float64, burst int) *Budget {
	return &Budget{rdb: rdb, prefix: opts.KeyPrefix() + "{inbox}:b:", rate: rate, burst: max(burst, 1)}
}

// Reserve takes one token for key and returns how long the caller must
// wait before using it (0 when available now).
func (b *Budget) Reserve(ctx context.Context, key string) (time.Duration, error) {
	if b.rate <= 0 {
		return 0, nil
	}
	token, err := callToken()
	if err != nil {
		return 0, err
	}
	us, err := bucketScript.Run(ctx, b.rdb, b.keys(key), b.args("reserve", token)...).Int64()
	if err != nil {
		return 0, fmt.Errorf("rediscluster: budget: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// keys returns the bucket and pause keys of key's bucket, in the inbox's
// slot.
func (b *Budget) keys(key string) []string {
	base := b.prefix + key
	return []string{base, base + ":pause"}
}

// args returns the bucket script's arguments for a call in mode.
func (b *Budget) args(mode, token string) []any {
	return []any{b.rate, b.burst, b.now.arg(), mode, token}
}

// Rates is the outbound platform budget the replicas share (the chat
// adapters' RateBudget): token buckets keyed by string, each with the rate
// and burst its caller names, and pause windows set after a platform's
// Retry-After.
type Rates struct {
	rdb    redis.UniversalClient
	prefix string
	now    clock
}

// NewRates returns the shared outbound budget.
func NewRates(rdb redis.UniversalClient, opts Options) *Rates {
	return &Rates{rdb: rdb, prefix: opts.KeyPrefix() + "rate:"}
}

// keys returns the bucket and pause keys of key, in one hash slot.
func (r *Rates) keys(key string) []string {
	base := r.prefix + "{" + key + "}"
	return []string{base, base + ":pause"}
}

// Take takes one token from key's bucket, which refills at perSec tokens
// a second up to burst, and returns 0; when the bucket has no token, or
// key is paused, it takes nothing and returns how long until it will have
// one. Like the in-process budget, a wait is lengthened by a tenth of the
// refill interval.
func (r *Rates) Take(ctx context.Context, key string, perSec float64, burst int) (time.Duration, error) {
	if perSec <= 0 {
		return 0, nil // no limit
	}
	token, err := callToken()
	if err != nil {
		return 0, err
	}
	us, err := bucketScript.Run(ctx, r.rdb, r.keys(key), perSec, max(burst, 1), r.now.arg(), "take", token).Int64()
	if err != nil {
		return 0, fmt.Errorf("rediscluster: rates: %w", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Pause makes every replica's Take of key wait d (a platform's
// Retry-After), unless key is already paused for longer.
func (r *Rates) Pause(ctx context.Context, key string, d time.Duration) error {
	ms := d.Milliseconds()
	if ms <= 0 {
		return nil
	}
	if err := pauseScript.Run(ctx, r.rdb, r.keys(key)[1:], ms).Err(); err != nil {
		return fmt.Errorf("rediscluster: rates pause: %w", err)
	}
	return nil
}

// PausedFor returns how long key is still paused on every replica (0:
// not paused).
func (r *Rates) PausedFor(ctx context.Context, key string) (time.Duration, error) {
	ms, err := r.rdb.PTTL(ctx, r.keys(key)[1]).Result()
	if err != nil {
		return 0, fmt.Errorf("rediscluster: rates paused: %w", err)
	}
	return max(ms, 0), nil
}
