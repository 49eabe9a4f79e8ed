package rediscluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/internal/tokenbucket"
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
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var bucketScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(bucketLua + `
return bucket(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5])
`)
})

// pauseScript sets the pause window KEYS[1] to ARGV[1] ms unless it
// already lasts longer.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var pauseScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 0
`)
})

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
	us, err := bucketScript().Run(ctx, b.rdb, b.keys(key), b.args("reserve", token)...).Int64()
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

// keys returns the bucket and pause keys of key. Their hash tag is the
// key's first two parts ("telegram/<bot id>", "slack/<team>"), so the
// buckets and pauses of one bot or workspace share a slot and one call's
// take names them in one script (TakeAll).
func (r *Rates) keys(key string) []string {
	tag, rest := key, ""
	if i := strings.IndexByte(key, '/'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '/'); j >= 0 {
			tag, rest = key[:i+1+j], key[i+1+j:]
		}
	}
	base := r.prefix + "{" + tag + "}" + rest
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
	d, _, err := r.TakeAll(ctx, key, []tokenbucket.Bucket{{Key: key, PerSec: perSec, Burst: burst}})
	return d, err
}

// TakeAll takes one token from each of buckets (distinct keys of one bot
// or workspace, see keys), all or none, in one round trip: while pause
// ("" for none) is paused, or when a bucket has no token, it takes
// nothing and returns how long to wait, with the index of the bucket that
// asked for it (-1: the pause).
func (r *Rates) TakeAll(ctx context.Context, pause string, buckets []tokenbucket.Bucket) (time.Duration, int, error) {
	keys := make([]string, 0, len(buckets)+1)
	args := make([]any, 0, 4+2*len(buckets))
	index := make([]int, 0, len(buckets)) // of the limited buckets in buckets
	for i, b := range buckets {
		if b.PerSec > 0 {
			keys = append(keys, r.keys(b.Key)[0])
			index = append(index, i)
		}
	}
	hasPause := "0"
	if pause != "" {
		keys = append(keys, r.keys(pause)[1])
		hasPause = "1"
	}
	if len(keys) == 0 {
		return 0, -1, nil // no limit
	}
	token, err := callToken()
	if err != nil {
		return 0, -1, err
	}
	args = append(args, r.now.arg(), token, len(index), hasPause)
	for _, i := range index {
		args = append(args, buckets[i].PerSec, max(buckets[i].Burst, 1))
	}
	res, err := takeAllScript().Run(ctx, r.rdb, keys, args...).Int64Slice()
	if err != nil || len(res) != 2 {
		return 0, -1, fmt.Errorf("rediscluster: rates: %w", cmp.Or(err, errors.New("unexpected answer")))
	}
	which := -1
	if res[1] > 0 {
		which = index[res[1]-1]
	}
	return time.Duration(res[0]) * time.Microsecond, which, nil
}

// takeAllScript takes a token from each bucket KEYS[1..n] or from none:
// ARGV now (µs, or "" for the server's clock), call token, n, "1" when
// KEYS[n+1] is a pause window to wait out, then each bucket's rate and
// burst. It returns {wait in µs, 1-based bucket that waits (0: none, or
// the pause)}. A call whose grant was recorded (the client retried after
// losing the answer) is granted again without taking more. The buckets
// are those of bucketLua (fields t, l, c, r).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var takeAllScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local n = tonumber(ARGV[3])
if n > 0 and redis.call('HGET', KEYS[1], 'c') == ARGV[2] then return {0, 0} end
if ARGV[4] == '1' then
  local p = redis.call('PTTL', KEYS[n+1])
  if p > 0 then return {p * 1000, 0} end
end
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local tokens, lasts, wait, which = {}, {}, 0, 0
for i = 1, n do
  local rate, burst = tonumber(ARGV[3 + 2*i]), tonumber(ARGV[4 + 2*i])
  local v = redis.call('HMGET', KEYS[i], 't', 'l')
  local t, last = tonumber(v[1]), tonumber(v[2])
  if t == nil or last == nil then t = burst; last = now end
  if now > last then
    t = math.min(burst, t + (now - last) / 1000000 * rate)
    last = now
  end
  tokens[i], lasts[i] = t, last
  if t < 1 then
    local w = math.ceil((1.1 - t) / rate * 1000000)
    if w > wait then wait = w; which = i end
  end
end
if wait > 0 then return {wait, which} end
for i = 1, n do
  local rate, burst = tonumber(ARGV[3 + 2*i]), tonumber(ARGV[4 + 2*i])
  local t = tokens[i] - 1
  redis.call('HSET', KEYS[i], 't', string.format('%.17g', t), 'l', string.format('%d', lasts[i]), 'c', ARGV[2], 'r', '0')
  redis.call('PEXPIRE', KEYS[i], math.ceil((burst - t) / rate * 1000) + 1000)
end
return {0, 0}
`)
})

// Pause makes every replica's Take of key wait d (a platform's
// Retry-After), unless key is already paused for longer.
func (r *Rates) Pause(ctx context.Context, key string, d time.Duration) error {
	ms := d.Milliseconds()
	if ms <= 0 {
		return nil
	}
	if err := pauseScript().Run(ctx, r.rdb, r.keys(key)[1:], ms).Err(); err != nil {
		return fmt.Errorf("rediscluster: rates pause: %w", err)
	}
	return nil
}
