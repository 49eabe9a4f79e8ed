package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pibot/pibot/cluster"
)

// Index is what RunIndexTests drives: the gateway's cluster.Index, and
// Close.
type Index interface {
	cluster.Index
	Close() error
}

// IndexHarness opens indexes for RunIndexTests.
type IndexHarness struct {
	// Open returns the index kept in store; opening a store again is a
	// restart of its process (or another replica).
	Open func(t *testing.T, store string) Index
	// Crash ends ix the way a killed process does: what it made durable
	// stays, what it only buffered may be lost.
	Crash func(t *testing.T, ix Index)
}

// RunIndexTests runs the index suite.
func RunIndexTests(t *testing.T, h IndexHarness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h IndexHarness, store string)
	}{
		{"BindIsSeenAtOnce", testIndexBind},
		{"SyncedBindingsSurviveCrash", testIndexCrash},
		{"SetIsDurable", testIndexSet},
		{"UnbindSurvivesReopen", testIndexUnbind},
		{"LastBindingWins", testIndexLastWins},
		{"KeysWithPrefixListsAConversation", testIndexPrefix},
		{"ConcurrentBindsAllDurable", testIndexConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h, t.TempDir()) })
	}
}

func get(t *testing.T, ix Index, loc string) (string, bool) {
	t.Helper()
	p, ok, err := ix.Get(t.Context(), loc)
	if err != nil {
		t.Fatalf("Get(%q): %v", loc, err)
	}
	return p, ok
}

func wantBound(t *testing.T, ix Index, loc, path string) {
	t.Helper()
	if p, ok := get(t, ix, loc); !ok || p != path {
		t.Fatalf("Get(%q) = %q, %v; want %q", loc, p, ok, path)
	}
}

func wantUnbound(t *testing.T, ix Index, loc string) {
	t.Helper()
	if p, ok := get(t, ix, loc); ok {
		t.Fatalf("Get(%q) = %q; want unbound", loc, p)
	}
}

func closeIndex(t *testing.T, ix Index) {
	t.Helper()
	if err := ix.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func testIndexBind(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	defer closeIndex(t, ix)
	wantUnbound(t, ix, "tg:1")
	if err := ix.Bind(t.Context(), "tg:1", "/s/a.jsonl"); err != nil {
		t.Fatal(err)
	}
	wantBound(t, ix, "tg:1", "/s/a.jsonl")
	if err := ix.Bind(t.Context(), "tg:1", ""); err != nil {
		t.Fatal(err)
	}
	wantUnbound(t, ix, "tg:1")
	// Unbinding what is not bound is no error.
	if err := ix.Bind(t.Context(), "tg:2", ""); err != nil {
		t.Fatal(err)
	}
}

func testIndexCrash(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	for i := range 3 {
		if err := ix.Bind(t.Context(), fmt.Sprintf("tg:%d", i), fmt.Sprintf("/s/%d.jsonl", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.Crash(t, ix)
	ix = h.Open(t, store)
	defer closeIndex(t, ix)
	for i := range 3 {
		wantBound(t, ix, fmt.Sprintf("tg:%d", i), fmt.Sprintf("/s/%d.jsonl", i))
	}
}

func testIndexSet(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	if err := ix.Set(t.Context(), "tg:1", "/s/a.jsonl"); err != nil {
		t.Fatal(err)
	}
	h.Crash(t, ix)
	ix = h.Open(t, store)
	defer closeIndex(t, ix)
	wantBound(t, ix, "tg:1", "/s/a.jsonl")
}

func testIndexUnbind(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	if err := ix.Set(t.Context(), "tg:1", "/s/a.jsonl"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Set(t.Context(), "tg:1", ""); err != nil {
		t.Fatal(err)
	}
	closeIndex(t, ix)
	ix = h.Open(t, store)
	defer closeIndex(t, ix)
	wantUnbound(t, ix, "tg:1")
}

func testIndexLastWins(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	for _, p := range []string{"/s/a.jsonl", "/s/b.jsonl", "/s/c.jsonl"} {
		if err := ix.Bind(t.Context(), "tg:1", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantBound(t, ix, "tg:1", "/s/c.jsonl")
	h.Crash(t, ix)
	ix = h.Open(t, store)
	defer closeIndex(t, ix)
	wantBound(t, ix, "tg:1", "/s/c.jsonl")
}

func testIndexPrefix(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	defer closeIndex(t, ix)
	for _, k := range []string{"tg:1", "tg:1:t5", "tg:1:t6", "tg:10", "tg:2:t1"} {
		if err := ix.Bind(t.Context(), k, "/s/"+k); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Bind(t.Context(), "tg:1:t6", ""); err != nil {
		t.Fatal(err)
	}
	keys, err := ix.KeysWithPrefix(t.Context(), "tg:1")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if want := []string{"tg:1", "tg:1:t5"}; !slices.Equal(keys, want) {
		t.Fatalf("KeysWithPrefix(tg:1) = %q, want %q", keys, want)
	}
	if keys, err := ix.KeysWithPrefix(t.Context(), "tg:3"); err != nil || len(keys) != 0 {
		t.Fatalf("KeysWithPrefix(tg:3) = %q, %v; want none", keys, err)
	}
}

func testIndexConcurrent(t *testing.T, h IndexHarness, store string) {
	ix := h.Open(t, store)
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := ix.Bind(context.Background(), fmt.Sprintf("tg:%d", i), fmt.Sprintf("/s/%d", i)); err != nil {
				errs <- err
				return
			}
			errs <- ix.Sync(context.Background())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	h.Crash(t, ix)
	ix = h.Open(t, store)
	defer closeIndex(t, ix)
	for i := range n {
		wantBound(t, ix, fmt.Sprintf("tg:%d", i), fmt.Sprintf("/s/%d", i))
	}
}
