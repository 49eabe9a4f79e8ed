package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Held is a lease as Redis holds it: for status reports.
type Held struct {
	Key    string        // what Acquire was given (a session, a leader role)
	Fence  int64         // the grant's fence
	Holder string        // the replica (Options.Holder)
	TTL    time.Duration // left until it expires without renewal
}

// Held lists the leases held now under this locker's prefix, by key.
func (l *Locker) Held(ctx context.Context) ([]Held, error) {
	start := l.prefix + "{lease:"
	const end = "}:lock"
	var keys []string
	iter := l.rdb.Scan(ctx, 0, globEscape(start)+"*"+globEscape(end), 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("rediscluster: held: %w", err)
	}
	out := make([]Held, 0, len(keys))
	for _, k := range keys {
		v, err := l.rdb.Get(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("rediscluster: held: %w", err)
		}
		ttl, err := l.rdb.PTTL(ctx, k).Result()
		if err != nil {
			return nil, fmt.Errorf("rediscluster: held: %w", err)
		}
		_, rest, _ := strings.Cut(v, ":")
		fence, holder, _ := strings.Cut(rest, ":")
		f, _ := strconv.ParseInt(fence, 10, 64)
		out = append(out, Held{
			Key:    strings.TrimSuffix(strings.TrimPrefix(k, start), end),
			Fence:  f,
			Holder: holder,
			TTL:    max(ttl, 0),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// globEscape quotes the characters SCAN's MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
