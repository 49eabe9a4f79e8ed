package rediscluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

func miniLocker(t *testing.T, opts rediscluster.Options) (*rediscluster.Locker, *miniredis.Miniredis) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rediscluster.NewLocker(rdb, opts, nil), mr
}

// The lease key holds token:fence under the configured prefix, with the
// TTL; the fence counter has no TTL.
func TestLeaseKeys(t *testing.T) {
	l, mr := miniLocker(t, rediscluster.Options{Prefix: "dep1:", LeaseTTL: 5 * time.Second, Holder: "replica-a"})
	le := mustAcquire(t, l, "tg:42", 0)
	v, err := mr.Get("dep1:{lease:tg:42}:lock")
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 40+len(":1:replica-a") || v[40:] != ":1:replica-a" {
		t.Fatalf("lease value %q, want a 40-hex token, :1 and the holder", v)
	}
	if ttl := mr.TTL("dep1:{lease:tg:42}:lock"); ttl != 5*time.Second {
		t.Fatalf("lease TTL %v, want 5s", ttl)
	}
	if f, _ := mr.Get("dep1:{lease:tg:42}:fence"); f != "1" || mr.TTL("dep1:{lease:tg:42}:fence") != 0 {
		t.Fatalf("fence counter %q ttl %v, want 1 without TTL", f, mr.TTL("dep1:{lease:tg:42}:fence"))
	}
	if err := le.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if mr.Exists("dep1:{lease:tg:42}:lock") {
		t.Fatal("Release left the lease key")
	}
	if !errors.Is(le.Err(), context.Canceled) {
		t.Fatalf("released lease Err = %v, want context.Canceled", le.Err())
	}
}

// Held lists the leases held under the locker's prefix with their fence
// and holder, and not those of another deployment or released ones.
func TestHeld(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, prefix, _ := b.Open(t, "held")
			r1 := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix, Holder: "r1"}, nil)
			r2 := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix, Holder: "r2"}, nil)
			other := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix + "*", Holder: "r3"}, nil)
			mustAcquire(t, r1, "sessions/a.jsonl", 4)
			mustAcquire(t, r2, "telegram:poll:1", 0)
			mustAcquire(t, other, "sessions/z.jsonl", 0)
			gone := mustAcquire(t, r1, "sessions/b.jsonl", 0)
			if err := gone.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			held, err := r1.Held(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(held) != 2 {
				t.Fatalf("Held = %+v, want 2 leases", held)
			}
			want := []rediscluster.Held{{Key: "sessions/a.jsonl", Fence: 5, Holder: "r1"}, {Key: "telegram:poll:1", Fence: 1, Holder: "r2"}}
			for i, h := range held {
				if h.Key != want[i].Key || h.Fence != want[i].Fence || h.Holder != want[i].Holder || h.TTL <= 0 || h.TTL > rediscluster.DefaultLeaseTTL {
					t.Fatalf("Held[%d] = %+v, want %+v with a TTL", i, h, want[i])
				}
			}
			// A prefix with a glob character matches only itself.
			if held, err := other.Held(t.Context()); err != nil || len(held) != 1 || held[0].Key != "sessions/z.jsonl" {
				t.Fatalf("Held of the prefix ending in * = %+v, %v", held, err)
			}
		})
	}
}

// TestLeaseTaken: Taken tells whether anyone holds a lease, without
// taking it, whoever asks.
func TestLeaseTaken(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, prefix, _ := b.Open(t, "taken")
			r1 := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix, Holder: "r1"}, nil)
			r2 := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix, Holder: "r2"}, nil)
			taken := func(key string) bool {
				t.Helper()
				ok, err := r2.Taken(t.Context(), key)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}
			if taken("sessions/a.jsonl") {
				t.Fatal("a lease nobody took is taken")
			}
			le := mustAcquire(t, r1, "sessions/a.jsonl", 0)
			if !taken("sessions/a.jsonl") || taken("sessions/b.jsonl") {
				t.Fatal("Taken does not tell r1's lease from a free one")
			}
			// Asking took nothing: r2 is refused while r1 holds it.
			if _, err := r2.Acquire(t.Context(), "sessions/a.jsonl", 0); err == nil {
				t.Fatal("r2 acquired a lease r1 holds")
			}
			if err := le.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			if taken("sessions/a.jsonl") {
				t.Fatal("a released lease is taken")
			}
		})
	}
}

// A lease whose key another holder overwrote is lost at the next renewal,
// with ErrLeaseLost, and its Release leaves the other holder's key alone.
func TestLeaseTakenByAnotherIsLost(t *testing.T) {
	l, mr := miniLocker(t, rediscluster.Options{LeaseTTL: testTTL})
	le := mustAcquire(t, l, "s", 0)
	mr.Set(l.LockKey("s"), "someone-else:9")
	waitDone(t, le, rediscluster.ErrLeaseLost)
	if err := le.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(t.Context(), "s", 0); err == nil {
		t.Fatal("Acquire of a key someone else holds succeeded")
	}
	if st := l.Stats(); st != (rediscluster.LockerStats{Granted: 1, Refused: 1, Lost: 1}) {
		t.Fatalf("Stats = %+v", st)
	}
	if v, _ := mr.Get(l.LockKey("s")); v != "someone-else:9" {
		t.Fatalf("a lost lease's Release changed the key to %q", v)
	}
}

// Renewals move the local deadline forward; the deadline is within the
// TTL of the last renewal.
func TestLeaseDeadlineMovesWithRenewals(t *testing.T) {
	const ttl = testTTL
	l, _ := miniLocker(t, rediscluster.Options{LeaseTTL: ttl})
	before := time.Now()
	le := mustAcquire(t, l, "s", 0)
	first := le.Deadline()
	if first.Before(before) || first.After(before.Add(ttl)) {
		t.Fatalf("deadline %v is not within the TTL of the grant", first.Sub(before))
	}
	time.Sleep(ttl)
	if !le.Deadline().After(first) {
		t.Fatal("renewals did not move the deadline")
	}
	if err := le.Err(); err != nil {
		t.Fatalf("renewed lease ended: %v", err)
	}
}

func TestLockerDefaults(t *testing.T) {
	l, _ := miniLocker(t, rediscluster.Options{})
	if l.TTL() != rediscluster.DefaultLeaseTTL {
		t.Fatalf("default TTL %v", l.TTL())
	}
	if !strings.HasPrefix(l.LockKey("x"), rediscluster.DefaultPrefix) {
		t.Fatalf("key %q lacks the default prefix", l.LockKey("x"))
	}
	l, _ = miniLocker(t, rediscluster.Options{LeaseTTL: time.Millisecond})
	if l.TTL() != rediscluster.MinLeaseTTL {
		t.Fatalf("a 1ms TTL became %v, want the minimum %v", l.TTL(), rediscluster.MinLeaseTTL)
	}
}

// Acquire on an unreachable Redis fails with an error that is not
// ErrLeaseHeld (the caller must not think someone else has the session).
func TestAcquireRedisUnreachable(t *testing.T) {
	l, mr := miniLocker(t, rediscluster.Options{})
	mr.Close()
	_, err := l.Acquire(t.Context(), "s", 0)
	if err == nil || errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("Acquire = %v, want a connection error", err)
	}
}
