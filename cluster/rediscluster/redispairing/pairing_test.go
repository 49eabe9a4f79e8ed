package redispairing_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redispairing"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/gateway/access/accesstest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

func TestPairingsConformance(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			accesstest.RunPairingStoreTests(t, accesstest.Harness{
				Open: func(t *testing.T) (accesstest.Store, func(time.Duration)) {
					rdb, prefix, _ := b.Open(t, t.Name())
					p := redispairing.NewPairings(rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)})
					var mu sync.Mutex
					now := time.Unix(1_800_000_000, 0)
					p.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
					return p, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
				},
			})
		})
	}
}

// Strangers asking at once on several replicas never get more than
// MaxPendingPer codes of a platform between them, and a code one replica
// issued is approved through another.
func TestPairingsLimitsHoldAcrossReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			var replicas []*redispairing.Pairings
			for range 3 {
				rdb, prefix, _ := b.Open(t, "shared")
				replicas = append(replicas, redispairing.NewPairings(rdb, rediscluster.Options{Prefix: prefix}))
			}
			const askers = 3 * access.MaxPendingPer
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				codes = map[string]string{}
			)
			for i := range askers {
				wg.Go(func() {
					code, created, err := replicas[i%3].RequestCode(t.Context(), "telegram", fmt.Sprint("u", i), "")
					switch {
					case err == nil && created:
						mu.Lock()
						codes[fmt.Sprint("u", i)] = code
						mu.Unlock()
					case errors.Is(err, access.ErrTooManyPending):
					default:
						t.Errorf("RequestCode: %q %v %v", code, created, err)
					}
				})
			}
			wg.Wait()
			if len(codes) != access.MaxPendingPer {
				t.Fatalf("%d codes issued across replicas, want MaxPendingPer = %d", len(codes), access.MaxPendingPer)
			}
			for user, code := range codes {
				p, err := replicas[2].Approve(t.Context(), "telegram", code)
				if err != nil || p.User != user {
					t.Fatalf("Approve on another replica = %+v, %v", p, err)
				}
				if ok, err := replicas[0].Approved(t.Context(), "telegram", user); !ok || err != nil {
					t.Fatalf("Approved on a third replica = %v, %v", ok, err)
				}
				break
			}
		})
	}
}
