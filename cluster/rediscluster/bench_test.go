package rediscluster_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

func benchLocker(b *testing.B) *rediscluster.Locker {
	addr := redistest.RealAddr(b)
	if addr == "" {
		b.Skip("no redis-server binary")
	}
	rdb, prefix, _ := redistest.OpenReal(addr)(b, "bench")
	return rediscluster.NewLocker(rdb, rediscluster.Options{Prefix: prefix, LeaseTTL: time.Minute}, nil)
}

// BenchmarkLeaseAcquireRelease: one grant and its release on the real
// Redis (two round trips).
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		le, err := l.Acquire(ctx, fmt.Sprint("s", i%64), 0)
		if err != nil {
			b.Fatal(err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaseRenew: one renewal on the real Redis.
func BenchmarkLeaseRenew(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	le, err := l.Acquire(ctx, "s", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer le.Release(ctx)
	lease := le.(*rediscluster.Lease)
	b.ResetTimer()
	for range b.N {
		if ok, err := lease.RenewOnce(); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkDedupeSeen: one inbound message's dedupe check on the real
// Redis.
func BenchmarkDedupeSeen(b *testing.B) {
	addr := redistest.RealAddr(b)
	if addr == "" {
		b.Skip("no redis-server binary")
	}
	rdb, prefix, _ := redistest.OpenReal(addr)(b, "bench")
	d := rediscluster.NewDedupe(rdb, rediscluster.Options{Prefix: prefix}, time.Minute)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := d.Seen(ctx, fmt.Sprint("telegram:1:", i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRatesTake: one outbound call's pacing on the real Redis.
func BenchmarkRatesTake(b *testing.B) {
	addr := redistest.RealAddr(b)
	if addr == "" {
		b.Skip("no redis-server binary")
	}
	rdb, prefix, _ := redistest.OpenReal(addr)(b, "bench")
	r := rediscluster.NewRates(rdb, rediscluster.Options{Prefix: prefix})
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := r.Take(ctx, fmt.Sprint("telegram/1/chat/", i%100), 1, 20); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaseAcquire: one grant of a free lease on the real Redis (the
// acquire script: GET, INCR, SET PX). The leases are released after the
// timed part.
func BenchmarkLeaseAcquire(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	leases := make([]cluster.Lease, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		le, err := l.Acquire(ctx, fmt.Sprint("a", i), 0)
		if err != nil {
			b.Fatal(err)
		}
		leases = append(leases, le)
	}
	b.StopTimer()
	for _, le := range leases {
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaseRelease: one release on the real Redis (the renewer
// stops, then the release script: GET, DEL). The leases are granted
// before the timed part.
func BenchmarkLeaseRelease(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	leases := make([]cluster.Lease, 0, b.N)
	for i := range b.N {
		le, err := l.Acquire(ctx, fmt.Sprint("r", i), 0)
		if err != nil {
			b.Fatal(err)
		}
		leases = append(leases, le)
	}
	b.ResetTimer()
	for _, le := range leases {
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeaseAcquireHeld: one refused Acquire of a lease another
// holder has (what a replica pays to learn a session is elsewhere).
func BenchmarkLeaseAcquireHeld(b *testing.B) {
	l := benchLocker(b)
	ctx := context.Background()
	held, err := l.Acquire(ctx, "held", 0)
	if err != nil {
		b.Fatal(err)
	}
	defer held.Release(ctx)
	b.ResetTimer()
	for range b.N {
		if _, err := l.Acquire(ctx, "held", 0); !errors.Is(err, cluster.ErrLeaseHeld) {
			b.Fatalf("Acquire of a held lease: %v, want ErrLeaseHeld", err)
		}
	}
}
