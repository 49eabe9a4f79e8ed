package rediscluster_test

import (
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// retryTargets returns the addresses of a fresh miniredis and, when a
// redis-server binary exists, of a private real server.
func retryTargets(t *testing.T) map[string]string {
	out := map[string]string{"miniredis": miniredis.RunT(t).Addr()}
	if _, err := exec.LookPath("redis-server"); err == nil {
		out["redis"] = redistest.PrivateServer(t).Addr
	}
	return out
}

// retryingClient talks to addr through a proxy that can lose answers, and
// runs a command again when its answer does not come within 200ms, as
// go-redis does by default after its read timeout.
func retryingClient(t *testing.T, addr string) (*redis.Client, *proxy) {
	px := newProxy(t, addr)
	rdb := redis.NewClient(&redis.Options{Addr: px.addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: 2})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, px
}

// A grant whose answer was lost and that the client ran again is the same
// grant: not "held by another owner", and the fence counter moved once.
func TestAcquireRunAgainAfterALostAnswer(t *testing.T) {
	for name, addr := range retryTargets(t) {
		t.Run(name, func(t *testing.T) {
			rdb, px := retryingClient(t, addr)
			l := rediscluster.NewLocker(rdb, rediscluster.Options{LeaseTTL: time.Minute}, nil)
			mustAcquire(t, l, "warm", 0) // scripts loaded, connection open
			px.dropAnswers(1)
			le := mustAcquire(t, l, "s1", 10)
			if le.Fence() != 11 {
				t.Fatalf("fence %d, want 11", le.Fence())
			}
			direct := client(t, addr)
			if n, err := direct.Get(t.Context(), "pibot:{lease:s1}:fence").Int64(); err != nil || n != 11 {
				t.Fatalf("fence counter %d, %v: the retry granted again", n, err)
			}
		})
	}
}

// A dedupe check whose answer was lost and that the client ran again does
// not call the new message a duplicate (it would be dropped).
func TestDedupeRunAgainAfterALostAnswer(t *testing.T) {
	for name, addr := range retryTargets(t) {
		t.Run(name, func(t *testing.T) {
			rdb, px := retryingClient(t, addr)
			d := rediscluster.NewDedupe(rdb, rediscluster.Options{}, time.Hour)
			if _, err := d.Seen(t.Context(), "warm"); err != nil {
				t.Fatal(err)
			}
			px.dropAnswers(1)
			seen, err := d.Seen(t.Context(), "telegram:1:100")
			if err != nil || seen {
				t.Fatalf("first delivery after a lost answer: seen %v, %v; want new", seen, err)
			}
			// Its key is pending until the event is taken: a redelivery
			// meanwhile is in flight, not new.
			if seen, err := d.Seen(t.Context(), "telegram:1:100"); !errors.Is(err, cluster.ErrInFlight) {
				t.Fatalf("redelivery: seen %v, %v; want in flight", seen, err)
			}
		})
	}
}

// A take whose answer was lost and that the client ran again takes one
// token, not two.
func TestRatesRunAgainAfterALostAnswer(t *testing.T) {
	for name, addr := range retryTargets(t) {
		t.Run(name, func(t *testing.T) {
			rdb, px := retryingClient(t, addr)
			r := rediscluster.NewRates(rdb, rediscluster.Options{})
			take := func() time.Duration {
				t.Helper()
				d, err := r.Take(t.Context(), "bot", 0.001, 2)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			take() // scripts loaded, connection open; one token left
			px.dropAnswers(1)
			if d := take(); d != 0 {
				t.Fatalf("the last token, taken through a lost answer: wait %v", d)
			}
			if d := take(); d == 0 {
				t.Fatal("a third take of a burst of 2 was granted")
			}
			b := rediscluster.NewBudget(rdb, rediscluster.Options{}, 0.001, 1)
			if _, err := b.Reserve(t.Context(), "u"); err != nil {
				t.Fatal(err)
			}
			px.dropAnswers(1)
			d, err := b.Reserve(t.Context(), "u")
			if err != nil {
				t.Fatal(err)
			}
			// One token in debt at 0.001/s is 1000s, two would be 2000s.
			if d < 999*time.Second || d > 1001*time.Second {
				t.Fatalf("second reserve through a lost answer waits %v, want one token's 1000s", d)
			}
		})
	}
}
