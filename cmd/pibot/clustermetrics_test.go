package main

import (
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/rediscluster"
)

// freeListen returns a loopback address nothing listens on now.
func freeListen(t *testing.T) string {
	t.Helper()
	// Outside the kernel's ephemeral range (32768-60999 by default): a
	// port the kernel hands to another socket (a parallel test's
	// listener or connection) in the instant between this check and
	// pibot's own bind made serve fail with "address already in use".
	for range 100 {
		addr := "127.0.0.1:" + strconv.Itoa(20000+rand.IntN(12000))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// metric returns the value of the series name (with its labels, if any)
// in s's /metrics, -1 when it is not there.
func (s *server) metric(t *testing.T, name string) float64 {
	t.Helper()
	_, body := s.get(t, "/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// webSay posts text to s's web chat conversation conv.
func (s *server) webSay(t *testing.T, conv, id, text string) {
	t.Helper()
	resp, err := http.Post(s.url+"/api/send", "application/json",
		strings.NewReader(`{"conv":"`+conv+`","id":"`+id+`","text":"`+text+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/send = %d", resp.StatusCode)
	}
}

// waitSession waits until the one session file under dir/data holds want.
func waitSession(t *testing.T, dir, want string, logs ...*server) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(dir, "data", "sessions", "*", "*.jsonl"))
		more, _ := filepath.Glob(filepath.Join(dir, "data", "sessions", "*", "*", "*.jsonl"))
		for _, f := range append(files, more...) {
			if strings.Contains(readFile(t, f), want) {
				return
			}
		}
	}
	for _, s := range logs {
		t.Logf("replica log:\n%s", s.stderr)
	}
	t.Fatalf("no session holds %q", want)
}

// TestClusterMetrics runs two `pibot serve` replicas on one data
// directory and the real Redis. Replica A answers a conversation (a lease
// held, inbox items taken); it is stopped (SIGSTOP) past the lease TTL
// while replica B takes the conversation over (a takeover); A, resumed,
// finds its lease gone and refuses to write (a fence rejection). The
// spend of both is counted in Redis, not in spend.json.
func TestClusterMetrics(t *testing.T) {
	t.Parallel()
	rdb, prefix := realRedis(t)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"limits:\n  global: {daily_usd: 0, daily_tokens: 100000000}\n"+
		"cluster:\n  redis_url: redis://127.0.0.1:6379/0\n  lease_ttl: 1s\n  key_prefix: \""+prefix+"\"\n"+testClusterSecret)
	a := startServe(t, dir, "-c", cfg, "--listen", freeListen(t))
	a.webSay(t, "c1", "m1", "hello from a")
	waitSession(t, dir, "You said: hello from a", a)
	if v := a.metric(t, "pibot_cluster_leases_held"); v < 1 {
		t.Errorf("A: pibot_cluster_leases_held = %v, want at least 1 (the session)", v)
	}
	if v := a.metric(t, "pibot_inbox_lag_seconds_count"); v < 1 {
		t.Errorf("A: pibot_inbox_lag_seconds_count = %v, want the taken item observed", v)
	}
	if v := a.metric(t, "pibot_cluster_takeovers_total"); v != 0 {
		t.Errorf("A: pibot_cluster_takeovers_total = %v for a new conversation, want 0", v)
	}

	b := startServe(t, dir, "-c", cfg, "--listen", freeListen(t))
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b.webSay(t, "c1", "m2", "hello from b")
	waitSession(t, dir, "You said: hello from b", a, b)
	if v := b.metric(t, "pibot_cluster_takeovers_total"); v != 1 {
		t.Errorf("B: pibot_cluster_takeovers_total = %v, want 1", v)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); a.metric(t, "pibot_cluster_fence_rejections_total") < 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A: pibot_cluster_fence_rejections_total = %v after its lease expired, want 1\n%s",
				a.metric(t, "pibot_cluster_fence_rejections_total"), a.stderr)
		}
	}
	if v := a.metric(t, `pibot_redis_errors_total{op="evalsha"}`); v > 0 {
		t.Errorf("A: %v Redis errors with Redis up", v)
	}

	day := time.Now().UTC().Format(time.DateOnly)
	tokens, err := rdb.HGet(t.Context(), prefix+"{spend}:"+day, "t:global").Int64()
	if err != nil || tokens <= 0 {
		t.Errorf("global tokens in Redis = %d, %v; want the two runs counted", tokens, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "spend.json")); err == nil {
		t.Error("spend.json written in cluster mode")
	}
	for _, s := range []*server{b, a} {
		if code := s.stop(t); code != 0 {
			t.Errorf("exit %d; stderr:\n%s", code, s.stderr)
		}
	}
}

// TestRedisErrorMetric: the hook counts failed commands by name, and
// neither a missing key nor a script's first EVALSHA.
func TestRedisErrorMetric(t *testing.T) {
	t.Parallel()
	rdb, prefix := realRedis(t)
	reg := prometheus.NewRegistry()
	locker := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix}, nil)
	registerClusterMetrics(reg, rdb, locker)
	// A missing key and a script Redis has not cached yet are no errors.
	_ = rdb.Get(t.Context(), prefix+"missing").Err()
	if err := redis.NewScript(`return '`+prefix+`'`).Run(t.Context(), rdb, nil).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Do(t.Context(), "NOSUCHCOMMAND").Err(); err == nil {
		t.Fatal("an unknown command succeeded")
	}
	// Redis down: the dial and the command both count.
	down := redis.NewClient(&redis.Options{Addr: freeListen(t), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	regDown := prometheus.NewRegistry()
	registerClusterMetrics(regDown, down, locker)
	if err := down.Ping(t.Context()).Err(); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	// go-redis dials a few times before it gives up: each attempt counts.
	if got := redisErrors(t, regDown); got["dial"] < 1 || got["ping"] != 1 || len(got) != 2 {
		t.Errorf("errors with Redis down = %v, want failed dials and one ping", got)
	}
	if got := redisErrors(t, reg); got["nosuchcommand"] != 1 || len(got) != 1 {
		t.Errorf("errors = %v, want only the unknown command's", got)
	}
}

// redisErrors reads pibot_redis_errors_total from reg, by op.
func redisErrors(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "pibot_redis_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
