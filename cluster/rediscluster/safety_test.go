package rediscluster_test

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// tenure is one holder's belief in a lease: from the moment its Acquire
// returned to the moment it stopped believing (it called Release, or its
// deadline, which no renewal moved any more).
type tenure struct {
	holder     int
	fence      int64
	start, end time.Time
}

// Replicas contend for one lease while their links to Redis are cut and
// healed at random: no two tenures overlap, and fences grow with every
// grant. Tenures end at the lease's own deadline, not when a goroutine
// noticed it, so the check holds on a loaded machine too.
func TestChaosLeaseSafetyUnderPartitions(t *testing.T) {
	srv := redistest.PrivateServer(t)
	const replicas = 3
	ttl := time.Second
	var (
		mu      sync.Mutex
		tenures []tenure
		proxies []*proxy
		wg      sync.WaitGroup
		current atomic.Int32 // the replica that last got the lease
	)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	for i := range replicas {
		px := newProxy(t, srv.Addr)
		proxies = append(proxies, px)
		l := rediscluster.NewLocker(client(t, px.addr), rediscluster.Options{LeaseTTL: ttl, Holder: string(rune('a' + i))}, nil)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for ctx.Err() == nil {
				le, err := l.Acquire(ctx, "leader", 0)
				if err != nil {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Millisecond)
					continue
				}
				start := time.Now()
				current.Store(int32(i))
				lease := le.(*rediscluster.Lease)
				hold := time.NewTimer(time.Duration(rng.IntN(int(3*ttl/2/time.Millisecond))) * time.Millisecond)
				var end time.Time
				select {
				case <-hold.C:
					end = time.Now()
				case <-lease.Done():
					end = lease.Deadline()
				case <-ctx.Done():
					end = time.Now()
				}
				hold.Stop()
				if d := lease.Deadline(); d.Before(end) {
					end = d // it believed only until its deadline
				}
				_ = lease.Release(context.Background())
				mu.Lock()
				tenures = append(tenures, tenure{holder: i, fence: lease.Fence(), start: start, end: end})
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // let the others in
			}
		})
	}
	// The nemesis: cut the holder's link, for about a TTL or two, so that
	// another replica takes over while the cut-off one may still believe.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(99, 1))
		for ctx.Err() == nil {
			px := proxies[current.Load()]
			px.block()
			select {
			case <-time.After(ttl/2 + time.Duration(rng.IntN(int(2*ttl/time.Millisecond)))*time.Millisecond):
			case <-ctx.Done():
			}
			px.unblock()
			select {
			case <-time.After(time.Duration(rng.IntN(300)) * time.Millisecond):
			case <-ctx.Done():
			}
		}
	})
	wg.Wait()

	sort.Slice(tenures, func(i, j int) bool { return tenures[i].start.Before(tenures[j].start) })
	if len(tenures) < 4 {
		t.Fatalf("only %d tenures: the test exercised nothing", len(tenures))
	}
	changes := 0
	for i := 1; i < len(tenures); i++ {
		prev, cur := tenures[i-1], tenures[i]
		if !prev.end.Before(cur.start) {
			t.Errorf("overlap: holder %d (fence %d) believed until %v after holder %d (fence %d) got the lease",
				prev.holder, prev.fence, prev.end.Sub(cur.start), cur.holder, cur.fence)
		}
		if cur.fence <= prev.fence {
			t.Errorf("fence went from %d to %d", prev.fence, cur.fence)
		}
		if prev.holder != cur.holder {
			changes++
		}
	}
	if changes < 2 {
		t.Fatalf("%d changes of holder in %d tenures: the partitions forced no takeover", changes, len(tenures))
	}
	t.Logf("%d tenures, %d changes of holder", len(tenures), changes)
}
