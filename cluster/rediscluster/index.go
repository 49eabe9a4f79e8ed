package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// getScript returns {seeded, path}: whether the index was seeded since
// Redis last lost its data (KEYS[3] exists) and the path bound to ARGV[1]
// in the hash KEYS[1] ("" when unbound).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var getScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local p = redis.call('HGET', KEYS[1], ARGV[1])
if not p then p = '' end
return {redis.call('EXISTS', KEYS[3]), p}
`)
})

// bindScript binds ARGV[1] to ARGV[2] in the hash KEYS[1] and lists it in
// the sorted set KEYS[2] (for prefix lookups); an empty path unbinds.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var bindScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
end
return 0
`)
})

// seedScript binds ARGV[2k] to ARGV[2k+1] unless bound already (a replica
// bound it since), then, if ARGV[1] is "1", marks the index seeded
// (KEYS[3]).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var seedScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
for i = 2, #ARGV, 2 do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i+1]) == 1 then
    redis.call('ZADD', KEYS[2], 0, ARGV[i])
  end
end
if ARGV[1] == '1' then redis.call('SET', KEYS[3], '1') end
return 0
`)
})

// seedBatch bounds the bindings one seed script call carries.
const seedBatch = 500

// IndexOptions configures NewIndex.
type IndexOptions struct {
	// Seed returns the bindings the session files hold. It runs when the
	// index has never been seeded or Redis lost its data (the seed mark is
	// gone), before the next lookup answers; bindings made since are
	// kept. nil: an empty Redis means an empty index.
	Seed func() (map[string]string, error)
}

// Index maps a location key to the session file that holds it, in a Redis
// hash every replica shares, with a sorted set of the keys for prefix
// lookups. Bindings are written through at once (Redis persistence is
// the durability), so Sync has nothing left to do.
//
// Bindings are sealed with the cluster secret (Options.Keys) for their
// location: a binding that does not open is reported (Options.OnForged)
// and replaced by what the session files say, so write access to Redis
// cannot point a conversation at another one's session file.
type Index struct {
	rdb  redis.UniversalClient
	keys []string // hash, sorted set, seed mark
	seed func() (map[string]string, error)
	opts Options

	seedMu sync.Mutex
}

// NewIndex returns the index kept in rdb.
func NewIndex(rdb redis.UniversalClient, opts Options, io IndexOptions) *Index {
	base := opts.KeyPrefix() + "{index}"
	return &Index{rdb: rdb, keys: []string{base, base + ":locs", base + ":seeded"}, seed: io.Seed, opts: opts}
}

// Get returns the session file bound to loc. After Redis lost its data it
// first seeds the index from the session files.
func (ix *Index) Get(ctx context.Context, loc string) (string, bool, error) {
	for attempt := 0; ; attempt++ {
		r, err := getScript().Run(ctx, ix.rdb, ix.keys, loc).Slice()
		if err != nil {
			return "", false, fmt.Errorf("rediscluster: index get: %w", err)
		}
		seeded, _ := r[0].(int64)
		path, _ := r[1].(string)
		if path != "" {
			plain, err := ix.opts.Keys.Open(ix.at(loc), path)
			if err != nil {
				ix.opts.forged("index", ix.keys[0]+" "+loc)
				return ix.rebind(ctx, loc)
			}
			path = string(plain)
		}
		if seeded == 1 || ix.seed == nil || attempt > 0 {
			return path, path != "", nil
		}
		if err := ix.Reseed(ctx); err != nil {
			return "", false, err
		}
	}
}

// Reseed binds what the session files hold (IndexOptions.Seed) unless
// already bound, and marks the index seeded. Concurrent callers of one
// replica seed once.
func (ix *Index) Reseed(ctx context.Context) error {
	if ix.seed == nil {
		return nil
	}
	ix.seedMu.Lock()
	defer ix.seedMu.Unlock()
	n, err := ix.rdb.Exists(ctx, ix.keys[2]).Result()
	if err != nil {
		return fmt.Errorf("rediscluster: index seed: %w", err)
	}
	if n == 1 {
		return nil // seeded meanwhile
	}
	binds, err := ix.seed()
	if err != nil {
		return fmt.Errorf("rediscluster: index seed: %w", err)
	}
	args := []any{"0"}
	for loc, p := range binds {
		if p == "" {
			continue
		}
		args = append(args, loc, ix.opts.Keys.Seal(ix.at(loc), []byte(p)))
		if len(args) > 2*seedBatch {
			if err := seedScript().Run(ctx, ix.rdb, ix.keys, args...).Err(); err != nil {
				return fmt.Errorf("rediscluster: index seed: %w", err)
			}
			args = args[:1]
		}
	}
	args[0] = "1"
	if err := seedScript().Run(ctx, ix.rdb, ix.keys, args...).Err(); err != nil {
		return fmt.Errorf("rediscluster: index seed: %w", err)
	}
	return nil
}

// at is what a binding of loc is sealed for.
func (ix *Index) at(loc string) string { return ix.keys[0] + " " + loc }

// rebind replaces a binding of loc that did not open with the one the
// session files hold (none: unbound).
func (ix *Index) rebind(ctx context.Context, loc string) (string, bool, error) {
	path := ""
	if ix.seed != nil {
		binds, err := ix.seed()
		if err != nil {
			return "", false, fmt.Errorf("rediscluster: index get: %w", err)
		}
		path = binds[loc]
	}
	if err := ix.Bind(ctx, loc, path); err != nil {
		return "", false, err
	}
	return path, path != "", nil
}

// KeysWithPrefix lists the bound locations of a conversation: keys equal
// to prefix or starting with prefix + ":".
func (ix *Index) KeysWithPrefix(ctx context.Context, prefix string) ([]string, error) {
	_, ok, err := ix.Get(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keys, err := ix.threads(ctx, prefix)
	if err != nil || !ok {
		return keys, err
	}
	return append([]string{prefix}, keys...), nil
}

// threads lists the keys that start with prefix + ":". ';' is the byte
// after ':', so the lexicographic range [prefix: , prefix;) holds them.
func (ix *Index) threads(ctx context.Context, prefix string) ([]string, error) {
	keys, err := ix.rdb.ZRangeByLex(ctx, ix.keys[1], &redis.ZRangeBy{Min: "[" + prefix + ":", Max: "(" + prefix + ";"}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("rediscluster: index keys: %w", err)
	}
	return keys, nil
}

// Bind binds loc to path ("" unbinds); every replica sees it at once.
func (ix *Index) Bind(ctx context.Context, loc, path string) error {
	sealed := ""
	if path != "" {
		sealed = ix.opts.Keys.Seal(ix.at(loc), []byte(path))
	}
	if err := bindScript().Run(ctx, ix.rdb, ix.keys[:2], loc, sealed).Err(); err != nil {
		return fmt.Errorf("rediscluster: index bind: %w", err)
	}
	return nil
}

// Set binds loc to path ("" unbinds); like Bind, it is written through.
func (ix *Index) Set(ctx context.Context, loc, path string) error { return ix.Bind(ctx, loc, path) }

// Sync returns nil: every binding was written through when it was made.
func (ix *Index) Sync(context.Context) error { return nil }

// Close returns nil: the index holds nothing but the client, which its
// opener closes.
func (ix *Index) Close() error { return nil }
