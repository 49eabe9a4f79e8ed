package rediscluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrPolicyUnknown is returned by EvictionPolicy when Redis answers
// neither CONFIG GET nor INFO memory with the policy (a managed Redis
// that disables both).
var ErrPolicyUnknown = errors.New("rediscluster: the server tells neither CONFIG GET maxmemory-policy nor INFO memory's maxmemory_policy")

// EvictionPolicy returns the server's maxmemory-policy: from CONFIG GET,
// or, where a managed Redis disables or renames CONFIG, from INFO
// memory's maxmemory_policy field. Any policy but "noeviction" lets Redis
// delete keys under memory pressure: inbox items and leases among them.
func EvictionPolicy(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	cfg, err := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err == nil {
		if p := cfg["maxmemory-policy"]; p != "" {
			return p, nil
		}
	} else if ctx.Err() != nil {
		return "", fmt.Errorf("rediscluster: config get: %w", err)
	}
	info, ierr := rdb.InfoMap(ctx, "memory").Result()
	if ierr == nil {
		if p := info["Memory"]["maxmemory_policy"]; p != "" {
			return p, nil
		}
	}
	// Some proxies answer INFO as plain text only.
	if raw, rerr := rdb.Info(ctx, "memory").Result(); rerr == nil {
		sc := bufio.NewScanner(strings.NewReader(raw))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok && v != "" {
				return v, nil
			}
		}
	}
	return "", ErrPolicyUnknown
}
