package rediscluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// chaosTTL is the lease TTL of the chaos tests.
const chaosTTL = 3 * time.Second

// client returns a client to addr that honours context deadlines, as
// rediscluster.Dial's does.
func client(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func chaosLocker(t *testing.T, addr string) *rediscluster.Locker {
	return rediscluster.NewLocker(client(t, addr), rediscluster.Options{LeaseTTL: chaosTTL}, nil)
}

func mustAcquire(t *testing.T, l *rediscluster.Locker, key string, minFence int64) *rediscluster.Lease {
	t.Helper()
	le, err := l.Acquire(t.Context(), key, minFence)
	if err != nil {
		t.Fatalf("Acquire(%q, %d): %v", key, minFence, err)
	}
	t.Cleanup(func() { _ = le.Release(context.Background()) })
	return le.(*rediscluster.Lease)
}

// takeOver polls l until it gets key's lease.
func takeOver(t *testing.T, l *rediscluster.Locker, key string, minFence int64) *rediscluster.Lease {
	t.Helper()
	deadline := time.Now().Add(10 * chaosTTL)
	for {
		le, err := l.Acquire(t.Context(), key, minFence)
		if err == nil {
			t.Cleanup(func() { _ = le.Release(context.Background()) })
			return le.(*rediscluster.Lease)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no takeover of %q: %v", key, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitDone(t *testing.T, le *rediscluster.Lease, want error) {
	t.Helper()
	select {
	case <-le.Done():
	case <-time.After(3 * chaosTTL):
		t.Fatal("the lease's Done did not close")
	}
	if !errors.Is(le.Err(), want) {
		t.Fatalf("lease ended with %v, want %v", le.Err(), want)
	}
}

// A replica cut off from Redis (its renewals blocked) learns that its
// lease is gone before anyone else can take it, and the next holder's
// fence is higher; when the cut heals, its Release does not free the new
// holder's lease.
func TestChaosLeaseExpiresWhileRenewalBlocked(t *testing.T) {
	srv := redistest.PrivateServer(t)
	px := newProxy(t, srv.Addr)
	la, lb := chaosLocker(t, px.addr), chaosLocker(t, srv.Addr)

	a := mustAcquire(t, la, "s1", 7)
	if a.Fence() != 8 {
		t.Fatalf("first fence with minFence 7 = %d, want 8", a.Fence())
	}
	time.Sleep(chaosTTL * 3 / 2) // renewals through the proxy keep it
	if _, err := lb.Acquire(t.Context(), "s1", a.Fence()); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("Acquire of a renewed lease = %v, want ErrLeaseHeld", err)
	}

	px.block()
	b := takeOver(t, lb, "s1", a.Fence())
	select {
	case <-a.Done():
	default:
		t.Fatal("another replica took the lease while its cut-off holder still believed it held it")
	}
	if !errors.Is(a.Err(), rediscluster.ErrLeaseExpired) {
		t.Fatalf("cut-off lease ended with %v, want ErrLeaseExpired", a.Err())
	}
	if b.Fence() <= a.Fence() {
		t.Fatalf("takeover fence %d is not above %d", b.Fence(), a.Fence())
	}

	px.unblock()
	if err := a.Release(t.Context()); err != nil {
		t.Fatalf("Release after the cut healed: %v", err)
	}
	if _, err := chaosLocker(t, srv.Addr).Acquire(t.Context(), "s1", 0); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("the stale holder's Release freed the new holder's lease: %v", err)
	}
	select {
	case <-b.Done():
		t.Fatalf("the new holder lost its lease: %v", b.Err())
	default:
	}
}

// Redis losing its data (a restart without persistence, FLUSHALL) while a
// lease is held: the holder is told (its renewal is refused), and the
// fence the next holder gets is above the file's highest fence although
// Redis's counter started again from nothing.
func TestChaosRedisLosesItsDataFencesStayAboveTheFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, srv *redistest.Server)
	}{
		{"RestartEmpty", func(t *testing.T, srv *redistest.Server) { srv.Restart(t) }},
		{"FlushAll", func(t *testing.T, srv *redistest.Server) {
			if err := client(t, srv.Addr).FlushAll(t.Context()).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.PrivateServer(t)
			l := chaosLocker(t, srv.Addr)
			var file int64 // the highest fence in the session file
			for range 3 {
				le := mustAcquire(t, l, "s1", file)
				if le.Fence() <= file {
					t.Fatalf("fence %d not above the file's %d", le.Fence(), file)
				}
				file = le.Fence()
				if err := le.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			a := mustAcquire(t, l, "s1", file)
			file = a.Fence()

			tc.lose(t, srv)

			b := takeOver(t, chaosLocker(t, srv.Addr), "s1", file)
			if b.Fence() <= file {
				t.Fatalf("after Redis lost its data the fence went back: %d after %d", b.Fence(), file)
			}
			// Without the file's fence the counter would have restarted:
			// the argument is what keeps fences growing.
			fresh := mustAcquire(t, l, "never-written", 0)
			if fresh.Fence() != 1 {
				t.Fatalf("a fresh counter gave %d; Redis kept its data?", fresh.Fence())
			}
			// Told by the refused renewal, or, when the restart took
			// longer than the lease had left, by its deadline.
			select {
			case <-a.Done():
			case <-time.After(3 * chaosTTL):
				t.Fatal("the holder was not told that Redis lost its lease")
			}
			if err := a.Err(); !errors.Is(err, rediscluster.ErrLeaseLost) && !errors.Is(err, rediscluster.ErrLeaseExpired) {
				t.Fatalf("lease ended with %v", err)
			}
		})
	}
}

// Redis down for longer than the TTL: the holder's lease ends at its
// deadline, acquiring fails with an error that is not ErrLeaseHeld, and
// once Redis is back leases are granted again above the file's fence.
func TestChaosRedisDown(t *testing.T) {
	srv := redistest.PrivateServer(t)
	l := chaosLocker(t, srv.Addr)
	a := mustAcquire(t, l, "s1", 41)
	srv.Kill()
	waitDone(t, a, rediscluster.ErrLeaseExpired)
	if st := l.Stats(); st.Expired != 1 || st.Held != 0 {
		t.Fatalf("Stats after Redis went down = %+v", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), chaosTTL)
	defer cancel()
	if _, err := l.Acquire(ctx, "s1", a.Fence()); err == nil || errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("Acquire with Redis down = %v, want a connection error", err)
	}
	srv.Restart(t)
	b := takeOver(t, l, "s1", a.Fence())
	if b.Fence() <= a.Fence() {
		t.Fatalf("fence %d after Redis came back is not above %d", b.Fence(), a.Fence())
	}
	if st := l.Stats(); st.Failed == 0 || st.Held != 1 || st.Granted != 2 {
		t.Fatalf("Stats after Redis came back = %+v", st)
	}
}

// An Acquire whose answer is lost (the grant happened, the reply never
// came) frees the key instead of blocking it for a TTL.
func TestAcquireWhoseAnswerIsLostFreesTheKey(t *testing.T) {
	srv := redistest.PrivateServer(t)
	px := newProxy(t, srv.Addr)
	// A TTL far longer than the test: only the clean-up can free the key.
	opts := rediscluster.Options{LeaseTTL: time.Minute}
	la := rediscluster.NewLocker(client(t, px.addr), opts, nil)
	direct := rediscluster.NewLocker(client(t, srv.Addr), opts, nil)
	mustAcquire(t, la, "warm", 0) // the connection is open: only answers will be lost
	px.dropAnswers(1)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := la.Acquire(ctx, "s1", 0); err == nil {
		t.Fatal("Acquire without an answer succeeded")
	}
	// The grant did happen on the server (its fence counter moved), and
	// the clean-up removed it: the key is free long before its TTL.
	le := mustAcquire(t, direct, "s1", 0)
	if le.Fence() != 2 {
		t.Fatalf("fence %d: the lost grant did not happen (want the second fence, 2)", le.Fence())
	}
}

// Redis losing its data while leases are held, and Recheck called (the
// inbox saw its epoch mark gone): every lease whose key is gone ends at
// once with ErrLeaseLost, not at its next renewal a third of the TTL (20
// s here) later, so its holder stops before another replica, which sees
// the loss too, takes its session over; a lease granted since is kept.
func TestChaosRecheckEndsTheLeasesRedisLost(t *testing.T) {
	srv := redistest.PrivateServer(t)
	l := rediscluster.NewLocker(client(t, srv.Addr), rediscluster.Options{LeaseTTL: time.Minute}, nil)
	a, b := mustAcquire(t, l, "s1", 0), mustAcquire(t, l, "s2", 0)
	if err := client(t, srv.Addr).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	c := mustAcquire(t, l, "s3", 0)
	l.Recheck()
	for _, le := range []*rediscluster.Lease{a, b} {
		select {
		case <-le.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a lease Redis lost was not ended by Recheck")
		}
		if !errors.Is(le.Err(), rediscluster.ErrLeaseLost) {
			t.Fatalf("lease ended with %v, want ErrLeaseLost", le.Err())
		}
	}
	if st := l.Stats(); st.Lost != 2 || st.Held != 1 {
		t.Fatalf("Stats after Recheck = %+v, want 2 lost and 1 held", st)
	}
	time.Sleep(200 * time.Millisecond) // c's renewal, sent with the others
	select {
	case <-c.Done():
		t.Fatalf("the lease granted after the loss ended: %v", c.Err())
	default:
	}
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
