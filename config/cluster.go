package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Bounds of cluster.lease_ttl: renewals run every TTL/3 and must get
// through in time; a crashed replica's sessions wait up to a TTL.
const (
	MinLeaseTTL = time.Second
	MaxLeaseTTL = 10 * time.Minute
)

func (c Cluster) validate(bad func(key, format string, args ...any)) {
	if c.RedisURL != "" {
		if msg := checkRedisURL(c.RedisURL); msg != "" {
			bad("cluster.redis_url", "%s", msg)
		}
	}
	if d := c.LeaseTTL.D(); d < MinLeaseTTL || d > MaxLeaseTTL {
		bad("cluster.lease_ttl", "%v is not between %v and %v", d, MinLeaseTTL, MaxLeaseTTL)
	}
	switch {
	case c.KeyPrefix == "":
		bad("cluster.key_prefix", "must not be empty (default pibot:)")
	case len(c.KeyPrefix) > 64:
		bad("cluster.key_prefix", "is longer than 64 bytes")
	case strings.ContainsAny(c.KeyPrefix, "{}*?[]"):
		bad("cluster.key_prefix", "%q must not contain { } * ? [ ] (they mean something to Redis)", c.KeyPrefix)
	case strings.ContainsFunc(c.KeyPrefix, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }):
		bad("cluster.key_prefix", "%q must not contain spaces or control characters", c.KeyPrefix)
	}
}

// checkRedisURL says what is wrong with a redis:// or rediss:// URL, or
// returns "". The message never repeats the URL, which may hold a
// password.
func checkRedisURL(raw string) string {
	const form = " (want redis[s]://[user:password@]host[:port][/db])"
	u, err := url.Parse(raw)
	if err != nil {
		return "is not a URL" + form
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return "must start with redis:// or rediss://" + form
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return "names no host" + form
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "has a bad port" + form
		}
	} else if _, _, err := net.SplitHostPort(u.Host); err == nil {
		return "has an empty port" + form
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return "has a database that is not a number" + form
		}
	}
	return ""
}
