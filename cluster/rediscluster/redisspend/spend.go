// Package redisspend is the spend store the replicas of a cluster share in
// Redis: it passes the spend.Store conformance suite
// (gateway/spend/spendtest), so the daily spend caps hold across
// replicas.
package redisspend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/gateway/spend"
)

// keepDays is how long a day's hash outlives its last change: the
// limiter only reads today's, and a day later it is of no use.
const keepDays = 2 * 24 * time.Hour

// Store keeps each UTC day's usage and overrides in one Redis hash,
// P{spend}:<day>: the field "$:<key>" holds the dollars (HINCRBYFLOAT),
// "t:<key>" the tokens (HINCRBY) and "o:<key>" the override (JSON). Adds
// are atomic increments, so replicas counting at once lose nothing; a
// reservation compares and adds in one script; every write is in Redis
// before it returns (no write-behind as in the file store). Overrides
// raise caps, so they are sealed with the cluster secret
// (rediscluster.Keys): one that does not open is reported
// (Options.OnForged) and ignored. The counts are plain numbers that
// anyone with write access to Redis can lower.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	opts   rediscluster.Options
}

var _ spend.Store = (*Store)(nil)

// New returns the shared spend store, kept under opts.KeyPrefix().
func New(rdb redis.UniversalClient, opts rediscluster.Options) *Store {
	return &Store{rdb: rdb, prefix: opts.KeyPrefix() + "{spend}:", opts: opts}
}

// DayKey returns the Redis key of day's hash.
func (s *Store) DayKey(day string) string { return s.prefix + day }

// Add adds a to the usage of every key on day, in one transaction.
func (s *Store) Add(ctx context.Context, day string, keys []string, a spend.Amount) error {
	h := s.DayKey(day)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			if a.USD != 0 {
				p.HIncrByFloat(ctx, h, "$:"+k, a.USD)
			}
			if a.Tokens != 0 {
				p.HIncrBy(ctx, h, "t:"+k, a.Tokens)
			}
		}
		p.Expire(ctx, h, keepDays)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisspend: add: %w", err)
	}
	return nil
}

// reserveScript compares and adds in one step (see Store.Reserve).
// KEYS[1] is the day's hash; ARGV holds the dollars and tokens to add,
// the hash's TTL in seconds, then per key its name, dollar cap and token
// cap (0: none). It returns 1 or 0 (added or not), then each key's
// dollars and tokens as compared.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var reserveScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local h = KEYS[1]
local usd, tok = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {0}
local ok = 1
for i = 4, #ARGV, 3 do
  local u = redis.call('HGET', h, '$:' .. ARGV[i]) or '0'
  local t = redis.call('HGET', h, 't:' .. ARGV[i]) or '0'
  local cu, ct = tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  if cu > 0 and tonumber(u) + usd > cu + 1e-8 then ok = 0 end
  if ct > 0 and tonumber(t) + tok > ct then ok = 0 end
  out[#out + 1] = u
  out[#out + 1] = t
end
out[1] = ok
if ok == 1 then
  for i = 4, #ARGV, 3 do
    if usd ~= 0 then redis.call('HINCRBYFLOAT', h, '$:' .. ARGV[i], ARGV[1]) end
    if tok ~= 0 then redis.call('HINCRBY', h, 't:' .. ARGV[i], ARGV[2]) end
  end
  redis.call('EXPIRE', h, ARGV[3])
end
return out
`)
})

// Reserve adds a to every key on day only if no key would pass its cap,
// in one Lua script: replicas reserving at once never pass a cap
// together.
func (s *Store) Reserve(ctx context.Context, day string, keys []string, caps []spend.Cap, a spend.Amount) (bool, []spend.Amount, error) {
	if len(caps) != len(keys) {
		return false, nil, fmt.Errorf("redisspend: reserve: %d caps for %d keys", len(caps), len(keys))
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	args := []any{num(a.USD), strconv.FormatInt(a.Tokens, 10), int64(keepDays / time.Second)}
	for i, k := range keys {
		args = append(args, k, num(caps[i].USD), strconv.FormatInt(caps[i].Tokens, 10))
	}
	res, err := reserveScript().Run(ctx, s.rdb, []string{s.DayKey(day)}, args...).Slice()
	if err != nil {
		return false, nil, fmt.Errorf("redisspend: reserve: %w", err)
	}
	if len(res) != 1+2*len(keys) {
		return false, nil, fmt.Errorf("redisspend: reserve: %d values in the reply, want %d", len(res), 1+2*len(keys))
	}
	used := make([]spend.Amount, len(keys))
	for i := range keys {
		usd, err := number(res[1+2*i], 64)
		if err != nil {
			return false, nil, fmt.Errorf("redisspend: usage of %s: %w", keys[i], err)
		}
		tok, err := number(res[2+2*i], 0)
		if err != nil {
			return false, nil, fmt.Errorf("redisspend: usage of %s: %w", keys[i], err)
		}
		used[i] = spend.Amount{USD: usd, Tokens: int64(tok)}
	}
	ok, _ := res[0].(int64)
	return ok == 1, used, nil
}

// Usage returns the usage of each key on day (zero when none).
func (s *Store) Usage(ctx context.Context, day string, keys []string) ([]spend.Amount, error) {
	out := make([]spend.Amount, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	fields := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		fields = append(fields, "$:"+k, "t:"+k)
	}
	vals, err := s.rdb.HMGet(ctx, s.DayKey(day), fields...).Result()
	if err != nil {
		return nil, fmt.Errorf("redisspend: usage: %w", err)
	}
	for i := range keys {
		usd, err := number(vals[2*i], 64)
		if err != nil {
			return nil, fmt.Errorf("redisspend: usage of %s: %w", keys[i], err)
		}
		tok, err := number(vals[2*i+1], 0)
		if err != nil {
			return nil, fmt.Errorf("redisspend: usage of %s: %w", keys[i], err)
		}
		out[i] = spend.Amount{USD: usd, Tokens: int64(tok)}
	}
	return out, nil
}

// number parses an HMGET value: nil is 0; bits 0 wants an integer.
func number(v any, bits int) (float64, error) {
	if v == nil {
		return 0, nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("unexpected %T", v)
	}
	if bits == 0 {
		n, err := strconv.ParseInt(s, 10, 64)
		return float64(n), err
	}
	return strconv.ParseFloat(s, bits)
}

// SetOverride records an override of key for day.
func (s *Store) SetOverride(ctx context.Context, day, key string, o spend.Override) error {
	b, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("redisspend: override: %w", err)
	}
	h := s.DayKey(day)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, h, "o:"+key, s.opts.Keys.Seal(h+" o:"+key, b))
		p.Expire(ctx, h, keepDays)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisspend: override: %w", err)
	}
	return nil
}

// Overrides returns the overrides of the keys on day (zero: none).
func (s *Store) Overrides(ctx context.Context, day string, keys []string) ([]spend.Override, error) {
	out := make([]spend.Override, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	fields := make([]string, len(keys))
	for i, k := range keys {
		fields[i] = "o:" + k
	}
	vals, err := s.rdb.HMGet(ctx, s.DayKey(day), fields...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisspend: overrides: %w", err)
	}
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue
		}
		at := s.DayKey(day) + " " + fields[i]
		plain, err := s.opts.Keys.Open(at, str)
		if err != nil {
			if s.opts.OnForged != nil {
				s.opts.OnForged("spend", at)
			}
			continue
		}
		if err := json.Unmarshal(plain, &out[i]); err != nil {
			return nil, fmt.Errorf("redisspend: override of %s is damaged: %w", keys[i], err)
		}
	}
	return out, nil
}
