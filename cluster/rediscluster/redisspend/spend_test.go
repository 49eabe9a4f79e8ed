package redisspend_test

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redisspend"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/gateway/spend/spendtest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestStoreConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			spendtest.RunStoreTests(t, func(t *testing.T) (spend.Store, func() spend.Store) {
				rdb, prefix, _ := b.Open(t, t.Name())
				s := redisspend.New(rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)})
				return s, func() spend.Store {
					rdb, prefix, _ := b.Open(t, t.Name())
					return redisspend.New(rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)})
				}
			})
		})
	}
}

// Replicas counting the same keys at once lose no count, and a cap one
// replica's limiter sees reached is reached for the others.
func TestStoreSharedByReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			const replicas, adds = 3, 50
			noon := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
			day := noon.Format(time.DateOnly)
			keys := []string{"user:telegram:1", "conv:c", "global"}
			var wg sync.WaitGroup
			for range replicas {
				rdb, prefix, _ := b.Open(t, "shared")
				s := redisspend.New(rdb, rediscluster.Options{Prefix: prefix})
				wg.Go(func() {
					for range adds {
						if err := s.Add(t.Context(), day, keys, spend.Amount{USD: 0.25, Tokens: 10}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			rdb, prefix, _ := b.Open(t, "shared")
			s := redisspend.New(rdb, rediscluster.Options{Prefix: prefix})
			u, err := s.Usage(t.Context(), day, keys)
			if err != nil {
				t.Fatal(err)
			}
			want := spend.Amount{USD: replicas * adds * 0.25, Tokens: replicas * adds * 10}
			for i, got := range u {
				if got != want {
					t.Errorf("usage of %s = %+v, want %+v", keys[i], got, want)
				}
			}
			ttl, err := rdb.TTL(t.Context(), s.DayKey(day)).Result()
			if err != nil || ttl <= 0 || ttl > 48*time.Hour {
				t.Errorf("day key TTL = %v, %v; want at most two days", ttl, err)
			}
			// Replicas reserving at once, each through its own client, share
			// one cap: room for 25 reservations, 25 granted.
			var granted sync.WaitGroup
			var mu sync.Mutex
			n := 0
			capped := []string{"user:telegram:9", "conv:e", "global:reserve"}
			for range replicas {
				rdb, prefix, _ := b.Open(t, "shared")
				s := redisspend.New(rdb, rediscluster.Options{Prefix: prefix})
				granted.Go(func() {
					for range 20 {
						ok, _, err := s.Reserve(t.Context(), day, capped, []spend.Cap{{Tokens: 250}, {}, {}}, spend.Amount{Tokens: 10})
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							mu.Lock()
							n++
							mu.Unlock()
						}
					}
				})
			}
			granted.Wait()
			if n != 25 {
				t.Errorf("%d reservations of 10 tokens granted by %d replicas under a 250-token cap, want 25", n, replicas)
			}
			// A limiter on another replica refuses once the cap is passed.
			lim := spend.NewLimiter(s, spend.Caps{Global: spend.Cap{USD: 10}}, func() time.Time { return noon })
			if err := lim.Check(t.Context(), spend.Who{User: "telegram:2", Conv: "d"}); err == nil {
				t.Error("a run was allowed past the global cap counted by other replicas")
			}
		})
	}
}

// testKeys returns the sealing keys of a test's cluster secret.
func testKeys(t testing.TB) *rediscluster.Keys {
	t.Helper()
	k, err := rediscluster.NewKeys([]byte("test cluster secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestStoreIgnoresAForgedOverride: an override written into Redis without
// the cluster secret (lifting a user's cap) is reported and ignored; the
// owner's sealed override is read.
func TestStoreIgnoresAForgedOverride(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			rdb, prefix, _ := b.Open(t, "s")
			var forged []string
			s := redisspend.New(rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t),
				OnForged: func(kind, at string) { forged = append(forged, kind+" "+at) }})
			const day = "2026-03-04"
			if err := s.SetOverride(ctx, day, "user:owner-set", spend.Override{Lifted: true}); err != nil {
				t.Fatal(err)
			}
			if err := rdb.HSet(ctx, s.DayKey(day), "o:user:attacker", `{"lifted":true}`).Err(); err != nil {
				t.Fatal(err)
			}
			got, err := s.Overrides(ctx, day, []string{"user:owner-set", "user:attacker"})
			if err != nil {
				t.Fatal(err)
			}
			if !got[0].Lifted || got[1].Lifted {
				t.Errorf("overrides = %+v; want the owner's lifted and the forged one ignored", got)
			}
			if len(forged) != 1 {
				t.Errorf("reported forged: %q; want the attacker's override", forged)
			}
		})
	}
}
