package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
)

// The leases are labelled by what they are: the polling adapter and the
// schedules are leader roles, the rest sessions; a takeover's inbox guard
// is not listed.
func TestClusterStatusKinds(t *testing.T) {
	var out strings.Builder
	err := writeClusterStatus(&out, []rediscluster.Held{
		{Key: "adapter:telegram/poll/4242", Holder: "r1", Fence: 3, TTL: time.Second},
		{Key: "schedules", Holder: "r1", Fence: 7, TTL: time.Second},
		{Key: "sessions/telegram/42.jsonl", Holder: "r2", Fence: 1, TTL: time.Second},
		{Key: "inbox:telegram::42", Holder: "r2", Fence: 1, TTL: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			lines[f[2]] = f[1]
		}
	}
	for lease, kind := range map[string]string{"telegram/poll/4242": "leader", "schedules": "leader", "sessions/telegram/42.jsonl": "session"} {
		if lines[lease] != kind {
			t.Errorf("%s is labelled %q, want %q:\n%s", lease, lines[lease], kind, out.String())
		}
	}
	if strings.Contains(out.String(), "inbox:") {
		t.Errorf("an inbox guard is listed:\n%s", out.String())
	}
}

// TestClusterStatusRedisDown: with nothing listening at cluster.redis_url
// `pibot cluster status` prints one line naming the address and why, and
// none of go-redis's own log lines (one per failed dial before).
func TestClusterStatusRedisDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := freeListen(t) // nothing listens there now
	writeFile(t, dir, "c.yaml", fauxConfig+`cluster:
  redis_url: redis://:hunter2-redis-password@`+addr+`/0
  secret: "test cluster secret, 32 bytes at least"
`)
	r := pibot(t, dir, "", nil, "cluster", "status", "-c", "c.yaml")
	want := "pibot: cluster status: cannot reach Redis at " + addr + " (cluster.redis_url): connection refused\n"
	if r.code != 1 || r.stderr != want || r.stdout != "" {
		t.Errorf("exit %d\nstdout: %q\nstderr: %q\nwant stderr %q", r.code, r.stdout, r.stderr, want)
	}
}
