package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "pibot:"

// DefaultLeaseTTL is the lease time to live when Options.LeaseTTL is zero.
const DefaultLeaseTTL = 15 * time.Second

// MinLeaseTTL is the shortest lease time to live accepted: renewals run
// every TTL/3 and must get through in time.
const MinLeaseTTL = 300 * time.Millisecond

// Options configures the Redis implementations.
type Options struct {
	// Prefix starts every key (default DefaultPrefix), so deployments
	// can share one Redis.
	Prefix string
	// LeaseTTL is how long a lease lives without renewal (default
	// DefaultLeaseTTL); holders renew it every LeaseTTL/3.
	LeaseTTL time.Duration
	// Holder names this replica in its leases, for Locker.Held (default
	// host name and process id).
	Holder string
	// Keys seals the values a right rests on (see Keys); nil seals
	// nothing.
	Keys *Keys
	// OnForged, if set, is told of every value that failed to open
	// (kind: inbox, pairing, index, spend or topic; at: its Redis key or
	// channel), which is dropped or set aside, never used.
	OnForged func(kind, at string)
	// OnDataLost, if set, is told when the inbox finds that Redis lost
	// its data (its epoch mark is gone or changed), and OnRequeued of the
	// items of key it enqueued again then (see Inbox).
	OnDataLost func()
	OnRequeued func(key string, n int)
	// OnRepaired, if set, is told of a key of the wrong shape (a stream
	// without its consumer group, a key of another type) the inbox
	// repaired so that its intake goes on.
	OnRepaired func(at, what string)
}

func (o Options) holder() string {
	if o.Holder != "" {
		return o.Holder
	}
	h, err := os.Hostname()
	if err != nil {
		h = "unknown"
	}
	return h + "/" + strconv.Itoa(os.Getpid())
}

// KeyPrefix returns the prefix of every key: Prefix or DefaultPrefix.
func (o Options) KeyPrefix() string {
	if o.Prefix == "" {
		return DefaultPrefix
	}
	return o.Prefix
}

func (o Options) leaseTTL() time.Duration {
	if o.LeaseTTL <= 0 {
		return DefaultLeaseTTL
	}
	return o.LeaseTTL
}

// ParseURL checks a redis:// or rediss:// URL (user, password and db
// included) and returns the client options it names. Errors never repeat
// the URL, which may hold a password.
func ParseURL(u string) (*redis.Options, error) {
	if !strings.HasPrefix(u, "redis://") && !strings.HasPrefix(u, "rediss://") {
		return nil, errors.New("rediscluster: url must start with redis:// or rediss://")
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		// Parse errors may quote the URL and its password: keep the
		// reason only when it does not.
		why := "not a valid redis URL"
		if msg := err.Error(); !strings.Contains(msg, "://") && !strings.Contains(msg, "@") {
			why = strings.TrimPrefix(msg, "redis: ")
		}
		return nil, fmt.Errorf("rediscluster: url: %s (want redis[s]://[user:password@]host[:port][/db])", why)
	}
	return opt, nil
}

// Dial connects to the Redis at url and checks that it answers. The
// caller closes the client.
func Dial(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	// Calls end at their context's deadline (a lease renewal must not
	// wait past the lease's own).
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("rediscluster: ping %s: %w", opt.Addr, err)
	}
	return c, nil
}
