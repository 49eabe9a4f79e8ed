// Package clustertest is a conformance suite for the cluster seams of the
// gateway: lockers, inboxes, location indexes, dedupers, sender budgets and outbound rates.
// The embedded implementations of package cluster pass it; a Redis-backed
// one must pass it too. Each Run function takes a harness that opens the
// implementation on a named store, so a test can reopen the same store as
// a restarted process (or another replica) would.
package clustertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
)

// Locker is what RunLockerTests drives: the gateway's cluster.Locker.
type Locker = cluster.Locker

// LockerHarness opens lockers for RunLockerTests.
type LockerHarness struct {
	// Open returns a locker on store: lockers opened on one store share
	// their leases and fences (a restarted process, another replica).
	Open func(t *testing.T, store string) Locker
	// Expire makes the store forget key's lease as if its TTL ran out
	// without renewal (the holder paused or crashed); nil: leases of this
	// implementation never expire (the local Locker), and the expiry
	// tests are skipped.
	Expire func(t *testing.T, store, key string)
	// Wait lets time pass for renewals: long enough that an unrenewed
	// lease would have expired. nil: leases never expire.
	Wait func(t *testing.T)
}

// RunLockerTests runs the locker suite.
func RunLockerTests(t *testing.T, h LockerHarness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h LockerHarness, store string)
	}{
		{"OneHolderAtATime", testOneHolder},
		{"ReleaseClosesDoneAndFreesTheKey", testRelease},
		{"FencesGrowAcrossHolders", testFencesGrow},
		{"GrantIsAboveMinFence", testMinFence},
		{"ConcurrentAcquireHasOneWinner", testConcurrentAcquire},
		{"HeldLeaseIsRenewed", testRenewal},
		{"ExpiredLeaseIsLostAndTakenOver", testExpiry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h, t.TempDir()) })
	}
}

func acquire(t *testing.T, l Locker, key string, minFence int64) cluster.Lease {
	t.Helper()
	le, err := l.Acquire(t.Context(), key, minFence)
	if err != nil {
		t.Fatalf("Acquire(%q, %d): %v", key, minFence, err)
	}
	t.Cleanup(func() { _ = le.Release(context.Background()) })
	return le
}

func isDone(le cluster.Lease) bool {
	select {
	case <-le.Done():
		return true
	default:
		return false
	}
}

func testOneHolder(t *testing.T, h LockerHarness, store string) {
	l := h.Open(t, store)
	a := acquire(t, l, "s1", 0)
	if _, err := l.Acquire(t.Context(), "s1", 0); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("second Acquire of a held key = %v, want ErrLeaseHeld", err)
	}
	b := acquire(t, l, "s2", 0)
	if a.Fence() <= 0 || b.Fence() <= 0 {
		t.Fatalf("fences %d, %d: want positive", a.Fence(), b.Fence())
	}
	if isDone(a) || isDone(b) {
		t.Fatal("a held lease reports Done")
	}
}

func testRelease(t *testing.T, h LockerHarness, store string) {
	l := h.Open(t, store)
	a := acquire(t, l, "s1", 0)
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !isDone(a) {
		t.Fatal("Done not closed after Release")
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	b := acquire(t, l, "s1", 0)
	if b.Fence() < a.Fence() {
		t.Fatalf("fence went down: %d after %d", b.Fence(), a.Fence())
	}
	// A stale holder's second Release must not free its successor's lease.
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(t.Context(), "s1", 0); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("a stale Release freed the new holder's lease: %v", err)
	}
}

// testFencesGrow: a holder on a reopened store (a restarted process or
// another replica) that passes the file's highest fence gets a higher one.
func testFencesGrow(t *testing.T, h LockerHarness, store string) {
	a := acquire(t, h.Open(t, store), "s1", 0)
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	prev := a.Fence()
	for range 3 {
		b := acquire(t, h.Open(t, store), "s1", prev)
		if b.Fence() <= prev {
			t.Fatalf("new holder's fence %d is not above %d", b.Fence(), prev)
		}
		prev = b.Fence()
		if err := b.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// testMinFence: a store whose counter is behind the file (lost on
// failover) still grants above the file's fence, and stays above it.
func testMinFence(t *testing.T, h LockerHarness, store string) {
	l := h.Open(t, store)
	a := acquire(t, l, "s1", 1000)
	if a.Fence() <= 1000 {
		t.Fatalf("fence %d with minFence 1000", a.Fence())
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	b := acquire(t, h.Open(t, store), "s1", a.Fence())
	if b.Fence() <= a.Fence() {
		t.Fatalf("after a raised fence %d the next holder got %d", a.Fence(), b.Fence())
	}
}

func testConcurrentAcquire(t *testing.T, h LockerHarness, store string) {
	l := h.Open(t, store)
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []cluster.Lease
		others []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			le, err := l.Acquire(t.Context(), "hot", 0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				others = append(others, err)
				return
			}
			won = append(won, le)
		}()
	}
	wg.Wait()
	for _, le := range won {
		t.Cleanup(func() { _ = le.Release(context.Background()) })
	}
	if len(won) != 1 {
		t.Fatalf("%d concurrent Acquires won, want exactly 1", len(won))
	}
	for _, err := range others {
		if !errors.Is(err, cluster.ErrLeaseHeld) {
			t.Fatalf("a losing Acquire returned %v, want ErrLeaseHeld", err)
		}
	}
}

// testRenewal: a holder keeps its lease for longer than its TTL.
func testRenewal(t *testing.T, h LockerHarness, store string) {
	l := h.Open(t, store)
	a := acquire(t, l, "s1", 0)
	if h.Wait != nil {
		h.Wait(t)
	}
	if isDone(a) {
		t.Fatal("a held lease was lost although its holder lives")
	}
	if _, err := l.Acquire(t.Context(), "s1", 0); !errors.Is(err, cluster.ErrLeaseHeld) {
		t.Fatalf("another holder got a renewed lease: %v", err)
	}
}

// testExpiry: a lease that expired is lost (Done closes, so the holder
// stops writing) and another holder gets it with a higher fence.
func testExpiry(t *testing.T, h LockerHarness, store string) {
	if h.Expire == nil {
		t.Skip("leases of this locker are never lost, only released")
	}
	a := acquire(t, h.Open(t, store), "s1", 0)
	h.Expire(t, store, "s1")
	b := acquire(t, h.Open(t, store), "s1", a.Fence())
	if b.Fence() <= a.Fence() {
		t.Fatalf("takeover fence %d is not above %d", b.Fence(), a.Fence())
	}
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the old holder was not told that its lease is lost")
	}
	if isDone(b) {
		t.Fatal("the new holder's lease is done")
	}
}
