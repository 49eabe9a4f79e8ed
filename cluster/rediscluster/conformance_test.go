package rediscluster_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/pibot/pibot/cluster/clustertest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// testTTL is the lease TTL of the tests: short, so renewals and expiry
// happen within a test, and long enough that a renewal delayed by a
// loaded machine (with -race) still lands before the deadline.
const testTTL = 2 * time.Second

// realScale shrinks the durations of the dedupe suite on the real server,
// whose clock cannot be moved: a minute of the suite is two seconds there.
const realScale = 30

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestLockerConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var mu sync.Mutex
			lockers := map[string]*rediscluster.Locker{}
			minis := map[*miniredis.Miniredis]bool{}
			clustertest.RunLockerTests(t, clustertest.LockerHarness{
				Open: func(t *testing.T, store string) clustertest.Locker {
					rdb, prefix, mr := b.Open(t, store)
					l := rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix, LeaseTTL: testTTL}, nil)
					mu.Lock()
					defer mu.Unlock()
					lockers[store] = l
					if mr != nil && !minis[mr] {
						minis[mr] = true
						t.Cleanup(func() { mu.Lock(); delete(minis, mr); mu.Unlock() })
					}
					return l
				},
				// The store forgets the lease as its TTL would: miniredis
				// moves its clock past it; the real server is told to
				// expire it in a millisecond.
				Expire: func(t *testing.T, store, key string) {
					rdb, _, mr := b.Open(t, store)
					if mr != nil {
						mr.FastForward(testTTL)
						return
					}
					mu.Lock()
					k := lockers[store].LockKey(key)
					mu.Unlock()
					if err := rdb.PExpire(t.Context(), k, time.Millisecond).Err(); err != nil {
						t.Fatal(err)
					}
					time.Sleep(5 * time.Millisecond)
				},
				// Twice the TTL passes, on the wall clock (renewals run)
				// and on miniredis's clock.
				Wait: func(t *testing.T) {
					for range 8 {
						time.Sleep(testTTL / 4)
						mu.Lock()
						for mr := range minis {
							mr.FastForward(testTTL / 4)
						}
						mu.Unlock()
					}
				},
			})
		})
	}
}

func TestDedupeConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			clustertest.RunDedupeTests(t, clustertest.DedupeHarness{
				Open: func(t *testing.T, ttl time.Duration, _ int) (clustertest.Dedupe, func(time.Duration)) {
					rdb, prefix, mr := b.Open(t, t.Name())
					if mr != nil {
						return rediscluster.NewDedupe(rdb, rediscluster.Options{Prefix: prefix}, ttl), mr.FastForward
					}
					d := rediscluster.NewDedupe(rdb, rediscluster.Options{Prefix: prefix}, ttl/realScale)
					return d, func(d time.Duration) { time.Sleep(d / realScale) }
				},
			})
		})
	}
}

func TestBudgetConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			clustertest.RunBudgetTests(t, clustertest.BudgetHarness{
				Open: func(t *testing.T, rate float64, burst int) (clustertest.Budget, func(time.Duration)) {
					rdb, prefix, _ := b.Open(t, t.Name())
					c := clustertest.NewClock()
					bu := rediscluster.NewBudget(rdb, rediscluster.Options{Prefix: prefix}, rate, burst)
					bu.SetClock(c.Now)
					return bu, c.Advance
				},
			})
		})
	}
}

func TestRatesConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			clustertest.RunRatesTests(t, clustertest.RatesHarness{
				Open: func(t *testing.T) (clustertest.Rates, func(time.Duration)) {
					rdb, prefix, _ := b.Open(t, t.Name())
					c := clustertest.NewClock()
					r := rediscluster.NewRates(rdb, rediscluster.Options{Prefix: prefix})
					r.SetClock(c.Now)
					return r, c.Advance
				},
			})
		})
	}
}

func TestIndexConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			clustertest.RunIndexTests(t, clustertest.IndexHarness{
				Open: func(t *testing.T, store string) clustertest.Index {
					rdb, prefix, _ := b.Open(t, store)
					return rediscluster.NewIndex(rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)}, rediscluster.IndexOptions{})
				},
				// A killed replica loses nothing: every binding was
				// written through to Redis before Bind returned.
				Crash: func(t *testing.T, ix clustertest.Index) {},
			})
		})
	}
}

func TestInboxConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			clustertest.RunInboxTests(t, clustertest.InboxHarness{
				// Every store is one replica; opening it again is the
				// next process of that replica.
				Open: func(t *testing.T, store string) clustertest.Inbox {
					rdb, prefix, _ := b.Open(t, store)
					ib, err := rediscluster.OpenInbox(t.Context(), rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)}, "replica-1")
					if err != nil {
						t.Fatal(err)
					}
					return ib
				},
				// A killed process leaves what it wrote and no clean mark.
				Crash: func(t *testing.T, ib clustertest.Inbox) {},
			})
		})
	}
}
