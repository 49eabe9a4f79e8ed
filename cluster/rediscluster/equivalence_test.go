package rediscluster_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/clustertest"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// near reports whether two waits agree: Redis answers in whole
// microseconds, rounded up.
func near(a, b time.Duration) bool {
	d := a - b
	return (a == 0) == (b == 0) && d > -2*time.Microsecond && d < 2*time.Microsecond
}

// model is the token bucket both budgets document (cluster.Rates and
// cluster.Budget), written out plainly: the Redis scripts must answer as
// it does over long random runs.
type model struct {
	now     func() time.Time
	buckets map[string]*modelBucket
}

type modelBucket struct {
	tokens float64
	last   time.Time
}

func newModel(now func() time.Time) *model {
	return &model{now: now, buckets: map[string]*modelBucket{}}
}

func (m *model) refill(key string, rate, burst float64) *modelBucket {
	bk, ok := m.buckets[key]
	if !ok {
		bk = &modelBucket{tokens: burst, last: m.now()}
		m.buckets[key] = bk
	}
	bk.tokens = min(burst, bk.tokens+m.now().Sub(bk.last).Seconds()*rate)
	bk.last = m.now()
	return bk
}

// take: a token if there is one, else nothing and the wait for one plus
// a tenth of the refill interval.
func (m *model) take(key string, rate float64, burst int) time.Duration {
	bk := m.refill(key, rate, float64(burst))
	if bk.tokens >= 1 {
		bk.tokens--
		return 0
	}
	return time.Duration((1.1 - bk.tokens) / rate * float64(time.Second))
}

// reserve: a token always, in debt if need be, and the wait for it.
func (m *model) reserve(key string, rate float64, burst int) time.Duration {
	bk := m.refill(key, rate, float64(burst))
	bk.tokens--
	if bk.tokens >= 0 {
		return 0
	}
	return time.Duration(-bk.tokens / rate * float64(time.Second))
}

// The Redis buckets answer as the model over a long random run of takes:
// same grants, same waits.
func TestRatesMatchTheModel(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, prefix, _ := b.Open(t, "eq")
			c := clustertest.NewClock()
			remote := rediscluster.NewRates(rdb, rediscluster.Options{Prefix: prefix})
			remote.SetClock(c.Now)
			local := newModel(c.Now)
			rng := rand.New(rand.NewPCG(1, 2))
			limits := []struct {
				perSec float64
				burst  int
			}{{1, 3}, {20.0 / 60, 2}, {30, 30}, {0.5, 1}}
			for i := range 400 {
				key := fmt.Sprint("k", rng.IntN(3))
				lim := limits[rng.IntN(len(limits))]
				got, err := remote.Take(t.Context(), key+fmt.Sprint(lim), lim.perSec, lim.burst)
				if err != nil {
					t.Fatal(err)
				}
				want := local.take(key+fmt.Sprint(lim), lim.perSec, lim.burst)
				if !near(got, want) {
					t.Fatalf("step %d: Redis wait %v, model %v", i, got, want)
				}
				c.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
			}
		})
	}
}

func TestBudgetMatchesTheModel(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, prefix, _ := b.Open(t, "eq")
			c := clustertest.NewClock()
			remote := rediscluster.NewBudget(rdb, rediscluster.Options{Prefix: prefix}, 20.0/60, 10)
			remote.SetClock(c.Now)
			local := newModel(c.Now)
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range 400 {
				key := fmt.Sprint("u", rng.IntN(3))
				got, err := remote.Reserve(t.Context(), key)
				if err != nil {
					t.Fatal(err)
				}
				want := local.reserve(key, 20.0/60, 10)
				if !near(got, want) {
					t.Fatalf("step %d: Redis wait %v, model %v", i, got, want)
				}
				c.Advance(time.Duration(rng.IntN(6000)) * time.Millisecond)
			}
		})
	}
}
