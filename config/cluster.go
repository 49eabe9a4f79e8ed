package config

import (
	"fmt"
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
	if c.RedisURL != "" || c.Secret != "" || c.SecretFile != "" {
		c.validateSecret(bad)
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

// MinClusterSecret is the shortest cluster.secret accepted, in bytes.
const MinClusterSecret = 32

// validateSecret checks cluster.secret and cluster.secret_file. The secret
// is required in cluster mode wherever Redis is, loopback included: the
// attack it stops came from a tool on pibot's own host (a paired user's
// unsandboxed bash with redis-cli).
func (c Cluster) validateSecret(bad func(key, format string, args ...any)) {
	switch {
	case c.Secret != "" && c.SecretFile != "":
		bad("cluster.secret", "set either cluster.secret or cluster.secret_file, not both")
	case c.Secret == "" && c.SecretFile == "":
		bad("cluster.secret", "required in cluster mode: at least %d random bytes every replica shares "+
			"(e.g. openssl rand -base64 48; or cluster.secret_file). What the replicas read back from Redis is sealed "+
			"with it, so that write access to Redis alone cannot run a message as the owner or pair a stranger", MinClusterSecret)
	case c.Secret != "" && len(c.Secret) < MinClusterSecret:
		bad("cluster.secret", "is %d bytes, want at least %d (e.g. openssl rand -base64 48)", len(c.Secret), MinClusterSecret)
	case c.Secret == "" && c.RedisURL == "":
		// A secret file without cluster mode: checked when used.
	}
}

// Warnings returns what is accepted but unsafe in cluster mode: a Redis
// off loopback that asks for no password (anyone who reaches it reads
// and deletes the replicas' shared state). Nil outside cluster mode.
func (c Cluster) Warnings() []string {
	if c.RedisURL == "" {
		return nil
	}
	u, err := url.Parse(c.RedisURL)
	if err != nil {
		return nil // an error of Validate
	}
	if _, ok := u.User.Password(); ok || isLoopback(u.Hostname()) {
		return nil
	}
	return []string{fmt.Sprintf("cluster.redis_url: the Redis at %s is not on loopback and the URL has no password: "+
		"anyone who reaches it can read the replicas' shared state and stop their work "+
		"(set requirepass in Redis and write the URL as redis://:PASSWORD@%s)", u.Host, u.Host)}
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
