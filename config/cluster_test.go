package config

import (
	"strings"
	"testing"
	"time"
)

func TestClusterValidation(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*Cluster)
		wantKey string // "" valid
	}{
		{"defaults", func(*Cluster) {}, ""},
		{"redis url", func(c *Cluster) { c.RedisURL, c.Secret = "redis://127.0.0.1:6379", testSecret }, ""},
		{"tls url with password and db", func(c *Cluster) { c.RedisURL, c.Secret = "rediss://user:p%40ss@redis.internal:6380/3", testSecret }, ""},
		{"url without port", func(c *Cluster) { c.RedisURL, c.Secret = "redis://redis", testSecret }, ""},
		{"ipv6 host", func(c *Cluster) { c.RedisURL, c.Secret = "redis://[::1]:6379/0", testSecret }, ""},
		{"secret file", func(c *Cluster) { c.RedisURL, c.SecretFile = "redis://redis", "/run/secrets/pibot_cluster" }, ""},
		{"no secret", func(c *Cluster) { c.RedisURL = "redis://127.0.0.1:6379" }, "cluster.secret"},
		{"short secret", func(c *Cluster) { c.RedisURL, c.Secret = "redis://127.0.0.1:6379", "short" }, "cluster.secret"},
		{"secret and file", func(c *Cluster) {
			c.RedisURL, c.Secret, c.SecretFile = "redis://127.0.0.1:6379", testSecret, "/run/secrets/pibot_cluster"
		}, "cluster.secret"},
		{"http scheme", func(c *Cluster) { c.RedisURL = "http://127.0.0.1:6379" }, "cluster.redis_url"},
		{"bare host:port", func(c *Cluster) { c.RedisURL = "127.0.0.1:6379" }, "cluster.redis_url"},
		{"no host", func(c *Cluster) { c.RedisURL = "redis:///0" }, "cluster.redis_url"},
		{"bad port", func(c *Cluster) { c.RedisURL = "redis://h:99999" }, "cluster.redis_url"},
		{"empty port", func(c *Cluster) { c.RedisURL = "redis://h:" }, "cluster.redis_url"},
		{"db not a number", func(c *Cluster) { c.RedisURL = "redis://h:6379/main" }, "cluster.redis_url"},
		{"ttl too short", func(c *Cluster) { c.LeaseTTL = Duration(100 * time.Millisecond) }, "cluster.lease_ttl"},
		{"ttl zero", func(c *Cluster) { c.LeaseTTL = 0 }, "cluster.lease_ttl"},
		{"ttl too long", func(c *Cluster) { c.LeaseTTL = Duration(time.Hour) }, "cluster.lease_ttl"},
		{"ttl one second", func(c *Cluster) { c.LeaseTTL = Duration(time.Second) }, ""},
		{"empty prefix", func(c *Cluster) { c.KeyPrefix = "" }, "cluster.key_prefix"},
		{"prefix with hash tag", func(c *Cluster) { c.KeyPrefix = "pi{bot}:" }, "cluster.key_prefix"},
		{"prefix with glob", func(c *Cluster) { c.KeyPrefix = "pi*:" }, "cluster.key_prefix"},
		{"prefix with space", func(c *Cluster) { c.KeyPrefix = "pi bot:" }, "cluster.key_prefix"},
		{"prefix with newline", func(c *Cluster) { c.KeyPrefix = "pi\n" }, "cluster.key_prefix"},
		{"long prefix", func(c *Cluster) { c.KeyPrefix = strings.Repeat("p", 65) }, "cluster.key_prefix"},
		{"staging prefix", func(c *Cluster) { c.KeyPrefix = "pibot-staging:" }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mod(&c.Cluster)
			err := c.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("Validate() = %v, want it to name %q", err, tt.wantKey)
			}
		})
	}
}

// testSecret is a cluster.secret long enough.
const testSecret = "0123456789abcdef0123456789abcdef"

// TestClusterWarnings: a password-less Redis off loopback is warned
// about; one with a password, or on loopback, is not.
func TestClusterWarnings(t *testing.T) {
	for url, warn := range map[string]bool{
		"redis://redis:6379/0":              true,
		"redis://10.0.0.5":                  true,
		"rediss://user@redis.internal:6380": true,
		"redis://:pw@redis:6379/0":          false,
		"rediss://u:pw@redis.internal:6380": false,
		"redis://127.0.0.1:6379":            false,
		"redis://localhost":                 false,
		"redis://[::1]:6379":                false,
		"":                                  false,
	} {
		c := Cluster{RedisURL: url}
		got := c.Warnings()
		if (len(got) > 0) != warn {
			t.Errorf("%q: warnings %q, want a warning: %v", url, got, warn)
		}
		for _, w := range got {
			if !strings.Contains(w, "cluster.redis_url") || !strings.Contains(w, "requirepass") {
				t.Errorf("%q: warning %q does not name the key and the fix", url, w)
			}
		}
	}
}

// A bad redis_url is reported without its password.
func TestRedisURLErrorHidesPassword(t *testing.T) {
	for _, u := range []string{"http://:s3cret-pw@h:6379", "redis://:s3cret-pw@h:99999", "redis://u:s3cret-pw@h:6379/x", "redis://:s3cret-pw@h:6379/%zz"} {
		c := Default()
		c.Cluster.RedisURL = u
		err := c.Validate()
		if err == nil {
			t.Fatalf("%q validated", u)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("error repeats the password: %v", err)
		}
	}
}

func TestClusterKeysParse(t *testing.T) {
	cfg, err := Parse(strings.NewReader("cluster:\n  redis_url: redis://r:6379/1\n  lease_ttl: 30s\n  key_prefix: \"dep2:\"\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.RedisURL != "redis://r:6379/1" || cfg.Cluster.LeaseTTL.D() != 30*time.Second || cfg.Cluster.KeyPrefix != "dep2:" {
		t.Fatalf("cluster = %+v", cfg.Cluster)
	}
	cfg, err = Parse(strings.NewReader("cluster:\n  redis_url: redis://r\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.LeaseTTL.D() != 15*time.Second || cfg.Cluster.KeyPrefix != "pibot:" {
		t.Fatalf("defaults lost: %+v", cfg.Cluster)
	}
}
