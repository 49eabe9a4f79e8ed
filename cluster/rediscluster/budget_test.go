package rediscluster_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster/clustertest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// Two replicas' Rates on one Redis spend one bucket: a bot's budget is
// not granted once per replica.
func TestRatesSharedByReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			c := clustertest.NewClock()
			var rs []*rediscluster.Rates
			for range 2 {
				rdb, prefix, _ := b.Open(t, "shared")
				r := rediscluster.NewRates(rdb, rediscluster.Options{Prefix: prefix})
				r.SetClock(c.Now)
				rs = append(rs, r)
			}
			granted := 0
			for i := range 6 {
				d, err := rs[i%2].Take(t.Context(), "telegram/1/bot", 1, 3)
				if err != nil {
					t.Fatal(err)
				}
				if d == 0 {
					granted++
				}
			}
			if granted != 3 {
				t.Fatalf("two replicas granted %d takes of a burst of 3", granted)
			}
		})
	}
}

// Pause (a platform's Retry-After) makes every replica's Take of the key
// wait out the window; a shorter pause does not shorten it; other keys
// are not paused.
func TestRatesPause(t *testing.T) {
	mr := miniredis.RunT(t)
	open := func() *rediscluster.Rates {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		return rediscluster.NewRates(rdb, rediscluster.Options{})
	}
	r1, r2 := open(), open()
	take := func(r *rediscluster.Rates, key string) time.Duration {
		t.Helper()
		d, err := r.Take(t.Context(), key, 30, 30)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if err := r1.Pause(t.Context(), "bot", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r1.Pause(t.Context(), "bot", time.Second); err != nil {
		t.Fatal(err)
	}
	if d := take(r2, "bot"); d <= 9*time.Second || d > 10*time.Second {
		t.Fatalf("Take during a 10s pause on another replica waits %v", d)
	}
	if d, which, err := r2.TakeAll(t.Context(), "bot", []tokenbucket.Bucket{{Key: "bot/chat", PerSec: 30, Burst: 30}}); err != nil || which != -1 || d <= 9*time.Second || d > 10*time.Second {
		t.Fatalf("TakeAll during a 10s pause on another replica = %v (bucket %d), %v; want the pause's wait", d, which, err)
	}
	if d := take(r2, "other"); d != 0 {
		t.Fatalf("an unpaused key waits %v", d)
	}
	if d, _, err := r2.TakeAll(t.Context(), "other", nil); err != nil || d != 0 {
		t.Fatalf("TakeAll with an unpaused pause = %v, %v", d, err)
	}
	mr.FastForward(10 * time.Second)
	if d := take(r2, "bot"); d != 0 {
		t.Fatalf("after the pause Take waits %v", d)
	}
	if d, _, err := r2.TakeAll(t.Context(), "bot", nil); err != nil || d != 0 {
		t.Fatalf("TakeAll after the pause = %v, %v", d, err)
	}
	if err := r1.Pause(t.Context(), "bot", 0); err != nil {
		t.Fatalf("a zero pause: %v", err)
	}
}

// Without an injected clock the buckets run on the Redis server's clock,
// which every replica shares: a refused take says how long to wait, and
// after that wait the take is granted.
func TestRatesServerClock(t *testing.T) {
	addr := redistest.RealAddr(t)
	if addr == "" {
		t.Skip("no redis-server binary: the server clock needs a real Redis (miniredis's TIME does not move)")
	}
	rdb, prefix, _ := redistest.OpenReal(addr)(t, "clock")
	r := rediscluster.NewRates(rdb, rediscluster.Options{Prefix: prefix})
	take := func() time.Duration {
		t.Helper()
		d, err := r.Take(t.Context(), "chat", 10, 2)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	take()
	take()
	d := take()
	if d <= 0 || d > 110*time.Millisecond {
		t.Fatalf("wait past a burst of 2 at 10/s: %v, want (0, 110ms]", d)
	}
	time.Sleep(d)
	if d := take(); d != 0 {
		t.Fatalf("after waiting the wait given, another %v", d)
	}

	bu := rediscluster.NewBudget(rdb, rediscluster.Options{Prefix: prefix}, 10, 1)
	if d, err := bu.Reserve(t.Context(), "u"); err != nil || d != 0 {
		t.Fatalf("first Reserve: %v, %v", d, err)
	}
	if d, err := bu.Reserve(t.Context(), "u"); err != nil || d <= 0 || d > 100*time.Millisecond {
		t.Fatalf("second Reserve: %v, %v; want (0, 100ms]", d, err)
	}
}

// A zero rate means no limit, and no Redis call.
func TestNoLimit(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // nothing listens
	t.Cleanup(func() { _ = rdb.Close() })
	if d, err := rediscluster.NewRates(rdb, rediscluster.Options{}).Take(t.Context(), "k", 0, 5); d != 0 || err != nil {
		t.Fatalf("Take at rate 0 = %v, %v", d, err)
	}
	if d, err := rediscluster.NewBudget(rdb, rediscluster.Options{}, 0, 5).Reserve(t.Context(), "k"); d != 0 || err != nil {
		t.Fatalf("Reserve at rate 0 = %v, %v", d, err)
	}
}
