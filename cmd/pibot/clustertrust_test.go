package main

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// TestServeRefusesAnEvictingRedis: serve stops at start on a Redis whose
// maxmemory-policy may delete keys (issue 29: an eviction loses waiting
// messages silently), naming the key and the fix; config check, which
// does not connect, accepts the file.
func TestServeRefusesAnEvictingRedis(t *testing.T) {
	srv := redistest.PrivateServer(t, "--maxmemory-policy", "allkeys-lru")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"cluster:\n  redis_url: redis://"+srv.Addr+"/0\n"+testClusterSecret)
	r := pibot(t, dir, "", nil, "serve", "-c", cfg, "--listen", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "cluster.redis_url") || !strings.Contains(r.stderr, "allkeys-lru") ||
		!strings.Contains(r.stderr, "noeviction") {
		t.Fatalf("serve on an evicting Redis: exit %d, stderr %q; want a refusal naming the policy and noeviction", r.code, r.stderr)
	}
}

// TestServeRequiresTheClusterSecret: cluster mode without cluster.secret
// is refused by config check and serve alike, naming the key.
func TestServeRequiresTheClusterSecret(t *testing.T) {
	srv := redistest.PrivateServer(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"cluster:\n  redis_url: redis://"+srv.Addr+"/0\n")
	for _, args := range [][]string{{"config", "check", "-c", cfg}, {"serve", "-c", cfg, "--listen", "127.0.0.1:0"}} {
		r := pibot(t, dir, "", nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "cluster.secret") {
			t.Errorf("%s without cluster.secret: exit %d, stderr %q", args[0], r.code, r.stderr)
		}
	}
}

// TestReadyzReportsALossOfRedisData: FLUSHALL under a running replica is
// reported in /readyz (still 200: the replica works), in the log and in
// the metrics.
func TestReadyzReportsALossOfRedisData(t *testing.T) {
	srv := redistest.PrivateServer(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"cluster:\n  redis_url: redis://"+srv.Addr+"/0\n  lease_ttl: 1s\n"+testClusterSecret)
	s := startServe(t, dir, "-c", cfg, "--listen", freeListen(t))
	s.webSay(t, "c1", "m1", "hello")
	waitSession(t, dir, "You said: hello", s)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	if err := rdb.FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := s.get(t, "/readyz")
		if code == 200 && strings.Contains(body, "redis lost its data at") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after FLUSHALL: %d %q", code, body)
		}
	}
	if v := s.metric(t, "pibot_redis_data_lost_total"); v != 1 {
		t.Errorf("pibot_redis_data_lost_total = %v, want 1", v)
	}
	// Still answering.
	s.webSay(t, "c1", "m2", "after the flush")
	waitSession(t, dir, "You said: after the flush", s)
	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	if !strings.Contains(s.stderr.String(), "Redis lost its data") {
		t.Errorf("no log line of the loss:\n%s", s.stderr)
	}
}
