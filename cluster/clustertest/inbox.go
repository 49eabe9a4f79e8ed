package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pibot/pibot/cluster"
)

// Inbox is what RunInboxTests drives: the gateway's inbox with its crash
// counting (Attempt, Quarantine).
type Inbox interface {
	Begin(ctx context.Context, data []byte) (id string, durable func() error, err error)
	Ack(ctx context.Context, id string) error
	Pending(ctx context.Context) ([]cluster.InboxItem, error)
	Attempt(ctx context.Context, ids []string) error
	Quarantine(ctx context.Context, id string) error
	Quarantined(ctx context.Context) ([]cluster.InboxItem, error)
	// Close records a clean stop.
	Close() error
}

// InboxHarness opens inboxes for RunInboxTests.
type InboxHarness struct {
	// Open returns the inbox kept in store; opening a store again is a
	// restart of its process.
	Open func(t *testing.T, store string) Inbox
	// Crash ends ib the way a killed process does: what it wrote stays,
	// but it never records a clean stop.
	Crash func(t *testing.T, ib Inbox)
}

// RunInboxTests runs the inbox suite.
func RunInboxTests(t *testing.T, h InboxHarness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h InboxHarness, store string)
	}{
		{"DurableAcrossReopen", testInboxReopen},
		{"DurableAcrossCrash", testInboxCrash},
		{"AckRemoves", testInboxAck},
		{"ConcurrentBeginsAllDurable", testInboxConcurrent},
		{"CrashesOfItemsInFlightCounted", testInboxCrashCount},
		{"QuarantineSetsAsideForGood", testInboxQuarantine},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h, t.TempDir()) })
	}
}

func add(t *testing.T, ib Inbox, data string) string {
	t.Helper()
	id, durable, err := ib.Begin(t.Context(), []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	return id
}

func pending(t *testing.T, ib Inbox) []cluster.InboxItem {
	t.Helper()
	items, err := ib.Pending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func datas(items []cluster.InboxItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Data)
	}
	return out
}

func crashes(t *testing.T, ib Inbox) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, it := range pending(t, ib) {
		out[string(it.Data)] = it.Crashes
	}
	return out
}

func closeInbox(t *testing.T, ib Inbox) {
	t.Helper()
	if err := ib.Close(); err != nil {
		t.Fatal(err)
	}
}

func testInboxReopen(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	a := add(t, ib, `"one"`)
	add(t, ib, `"two"`)
	add(t, ib, `"three"`)
	if err := ib.Ack(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	closeInbox(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := datas(pending(t, ib)); !slices.Equal(got, []string{`"two"`, `"three"`}) {
		t.Fatalf("pending after reopen = %v, want two, three in order", got)
	}
	add(t, ib, `"four"`)
	if got := len(pending(t, ib)); got != 3 {
		t.Fatalf("%d pending after a new item, want 3", got)
	}
}

func testInboxCrash(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	add(t, ib, `"kept"`)
	h.Crash(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := datas(pending(t, ib)); !slices.Equal(got, []string{`"kept"`}) {
		t.Fatalf("pending after a crash = %v", got)
	}
}

func testInboxAck(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	defer closeInbox(t, ib)
	a := add(t, ib, `"a"`)
	b := add(t, ib, `"b"`)
	for _, id := range []string{a, a, "no-such-id"} { // acks are idempotent
		if err := ib.Ack(t.Context(), id); err != nil {
			t.Fatalf("Ack(%s): %v", id, err)
		}
	}
	if got := pending(t, ib); len(got) != 1 || got[0].ID != b {
		t.Fatalf("pending = %+v, want only b", got)
	}
}

func testInboxConcurrent(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	const n = 32
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, durable, err := ib.Begin(t.Context(), fmt.Appendf(nil, `{"n":%d}`, i))
			if err == nil {
				err = durable()
			}
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	h.Crash(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	seen := map[string]bool{}
	for _, it := range pending(t, ib) {
		seen[it.ID] = true
	}
	for i, id := range ids {
		if !seen[id] {
			t.Fatalf("item %d (%s) lost", i, id)
		}
	}
}

// testInboxCrashCount: a crash counts against the items the crashed
// process accepted or began to replay, not against items it left alone,
// and a clean stop counts nothing.
func testInboxCrashCount(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	add(t, ib, `"a"`)
	add(t, ib, `"b"`)
	h.Crash(t, ib) // a and b were in flight

	ib = h.Open(t, store)
	if got := crashes(t, ib); got[`"a"`] != 1 || got[`"b"`] != 1 {
		t.Fatalf("after one crash: %v, want a and b at 1", got)
	}
	var idA string
	for _, it := range pending(t, ib) {
		if string(it.Data) == `"a"` {
			idA = it.ID
		}
	}
	if err := ib.Attempt(t.Context(), []string{idA}); err != nil {
		t.Fatal(err)
	}
	h.Crash(t, ib) // only a was replayed

	ib = h.Open(t, store)
	if got := crashes(t, ib); got[`"a"`] != 2 || got[`"b"`] != 1 {
		t.Fatalf("after the second crash: %v, want a at 2, b at 1", got)
	}
	var ids []string
	for _, it := range pending(t, ib) {
		ids = append(ids, it.ID)
	}
	if err := ib.Attempt(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	closeInbox(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := crashes(t, ib); got[`"a"`] != 2 || got[`"b"`] != 1 {
		t.Fatalf("after a clean stop: %v, want unchanged", got)
	}
}

func testInboxQuarantine(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	bomb := add(t, ib, `"bomb"`)
	add(t, ib, `"fine"`)
	if err := ib.Quarantine(t.Context(), bomb); err != nil {
		t.Fatal(err)
	}
	h.Crash(t, ib)
	for range 2 {
		ib = h.Open(t, store)
		if got := datas(pending(t, ib)); !slices.Equal(got, []string{`"fine"`}) {
			t.Fatalf("pending = %v, want only fine", got)
		}
		q, err := ib.Quarantined(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 1 || q[0].ID != bomb || string(q[0].Data) != `"bomb"` {
			t.Fatalf("quarantined = %+v", q)
		}
		if err := ib.Ack(t.Context(), bomb); err != nil {
			t.Fatal(err)
		}
		closeInbox(t, ib)
	}
}
