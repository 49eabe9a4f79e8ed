package clustertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/pibot/pibot/cluster"
)

// Inbox is what RunInboxTests drives: the gateway's cluster.Inbox with
// the abilities cluster mode needs of it (taking items, telling which
// keys a take would hand any, leaving them, counting crashes against what
// executed, setting items aside).
type Inbox interface {
	cluster.Inbox
	cluster.Consumer
	cluster.Peeker
	cluster.Leaver
	cluster.Beginner
	cluster.Quarantiner
	// Quarantined lists the items set aside, oldest first.
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
		{"ConcurrentEnqueuesAllDurable", testInboxConcurrent},
		{"KeysKeepItemsApart", testInboxKeys},
		{"ConsumeHandsOutOnce", testInboxConsume},
		{"TakesHandOutNothingTwice", testInboxTakesOnce},
		{"ClaimTakesOverADeadHolder", testInboxClaim},
		{"TakeableNamesWhatATakeWouldHand", testInboxTakeable},
		{"CrashesOfItemsInFlightCounted", testInboxCrashCount},
		{"WaitingItemsAreNotBlamed", testInboxWaitingNotBlamed},
		{"QuarantineSetsAsideForGood", testInboxQuarantine},
		{"LeftItemsAreClaimedAgain", testInboxLeave},
		{"CutItemsCountOnce", testInboxLeaveCut},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h, t.TempDir()) })
	}
}

func add(t *testing.T, ib Inbox, key, data string) string {
	t.Helper()
	id, durable, err := ib.Enqueue(t.Context(), key, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	return id
}

func pending(t *testing.T, ib Inbox, key string) []cluster.InboxItem {
	t.Helper()
	items, err := ib.Pending(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

func keys(t *testing.T, ib Inbox) []string {
	t.Helper()
	ks, err := ib.Keys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func consume(t *testing.T, ib Inbox, key string) []string {
	t.Helper()
	items, err := ib.Consume(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return datas(items)
}

func claim(t *testing.T, ib Inbox, key string) []string {
	t.Helper()
	items, err := ib.Claim(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return datas(items)
}

func ack(t *testing.T, ib Inbox, key, id string) {
	t.Helper()
	if err := ib.Ack(t.Context(), key, id); err != nil {
		t.Fatalf("Ack(%s, %s): %v", key, id, err)
	}
}

func datas(items []cluster.InboxItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = string(it.Data)
	}
	return out
}

func crashes(t *testing.T, ib Inbox, ks ...string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, k := range ks {
		for _, it := range pending(t, ib, k) {
			out[string(it.Data)] = it.Crashes
		}
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
	a := add(t, ib, "k1", `"one"`)
	add(t, ib, "k2", `"other"`)
	add(t, ib, "k1", `"two"`)
	add(t, ib, "k1", `"three"`)
	ack(t, ib, "k1", a)
	closeInbox(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := datas(pending(t, ib, "k1")); !slices.Equal(got, []string{`"two"`, `"three"`}) {
		t.Fatalf("pending of k1 after reopen = %v, want two, three in order", got)
	}
	if got := keys(t, ib); !slices.Equal(got, []string{"k2", "k1"}) {
		t.Fatalf("keys after reopen = %q, want k2, k1 (by their oldest item)", got)
	}
	add(t, ib, "k1", `"four"`)
	if got := len(pending(t, ib, "k1")); got != 3 {
		t.Fatalf("%d pending after a new item, want 3", got)
	}
}

func testInboxCrash(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	add(t, ib, "k", `"kept"`)
	h.Crash(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := datas(pending(t, ib, "k")); !slices.Equal(got, []string{`"kept"`}) {
		t.Fatalf("pending after a crash = %v", got)
	}
}

func testInboxAck(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	defer closeInbox(t, ib)
	a := add(t, ib, "k", `"a"`)
	b := add(t, ib, "k", `"b"`)
	for _, id := range []string{a, a, "no-such-id"} { // acks are idempotent
		ack(t, ib, "k", id)
	}
	if got := pending(t, ib, "k"); len(got) != 1 || got[0].ID != b {
		t.Fatalf("pending = %+v, want only b", got)
	}
	ack(t, ib, "k", b)
	if got := keys(t, ib); len(got) != 0 {
		t.Fatalf("keys with nothing pending = %q", got)
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
			id, durable, err := ib.Enqueue(t.Context(), fmt.Sprint("k", i%4), fmt.Appendf(nil, `{"n":%d}`, i))
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
	for _, k := range keys(t, ib) {
		for _, it := range pending(t, ib, k) {
			seen[it.ID] = true
		}
	}
	for i, id := range ids {
		if !seen[id] {
			t.Fatalf("item %d (%s) lost", i, id)
		}
	}
}

// testInboxKeys: the items of one key are not those of another.
func testInboxKeys(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	defer closeInbox(t, ib)
	add(t, ib, "a", `"a1"`)
	b := add(t, ib, "b", `"b1"`)
	add(t, ib, "a", `"a2"`)
	if got := datas(pending(t, ib, "a")); !slices.Equal(got, []string{`"a1"`, `"a2"`}) {
		t.Fatalf("pending of a = %v", got)
	}
	if got := consume(t, ib, "b"); !slices.Equal(got, []string{`"b1"`}) {
		t.Fatalf("consume b = %v", got)
	}
	ack(t, ib, "a", b) // the wrong key acknowledges nothing of b
	if got := pending(t, ib, "b"); len(got) != 1 {
		t.Fatalf("b acknowledged under another key: pending %v", got)
	}
}

// testInboxConsume: Consume hands each item out once, whether it was
// there before or came later, and Claim has nothing while no holder died.
func testInboxConsume(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	defer closeInbox(t, ib)
	add(t, ib, "k", `"a"`)
	add(t, ib, "k", `"b"`)
	if got := consume(t, ib, "k"); !slices.Equal(got, []string{`"a"`, `"b"`}) {
		t.Fatalf("first consume = %v", got)
	}
	if got := consume(t, ib, "k"); len(got) != 0 {
		t.Fatalf("second consume = %v, want nothing", got)
	}
	c := add(t, ib, "k", `"c"`)
	if got := consume(t, ib, "k"); !slices.Equal(got, []string{`"c"`}) {
		t.Fatalf("consume after a new item = %v", got)
	}
	if got := claim(t, ib, "k"); len(got) != 0 {
		t.Fatalf("claim with a live holder = %v", got)
	}
	ack(t, ib, "k", c)
	if got := datas(pending(t, ib, "k")); !slices.Equal(got, []string{`"a"`, `"b"`}) {
		t.Fatalf("pending = %v, want a, b (consumed is not acknowledged)", got)
	}
}

// testInboxTakesOnce: however a process's items in hand end (some, all,
// out of order), its takes never hand one of them out again, nor one
// that ended: a take hands over only items it has not handed to this
// process yet.
func testInboxTakesOnce(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	defer closeInbox(t, ib)
	a := add(t, ib, "k", `"a"`)
	b := add(t, ib, "k", `"b"`)
	if got := consume(t, ib, "k"); !slices.Equal(got, []string{`"a"`, `"b"`}) {
		t.Fatalf("first consume = %v", got)
	}
	ack(t, ib, "k", b)
	if got := consume(t, ib, "k"); len(got) != 0 {
		t.Fatalf("consume after the newer item ended = %v, want nothing (a is in hand)", got)
	}
	if got := claim(t, ib, "k"); len(got) != 0 {
		t.Fatalf("claim of this process's own items = %v, want nothing", got)
	}
	ack(t, ib, "k", a)
	for round := range 3 {
		c := add(t, ib, "k", fmt.Sprintf(`"c%d"`, round))
		if got := consume(t, ib, "k"); !slices.Equal(got, []string{fmt.Sprintf(`"c%d"`, round)}) {
			t.Fatalf("round %d: consume = %v", round, got)
		}
		if got := consume(t, ib, "k"); len(got) != 0 {
			t.Fatalf("round %d: consume again = %v, want nothing", round, got)
		}
		ack(t, ib, "k", c)
		if got := consume(t, ib, "k"); len(got) != 0 {
			t.Fatalf("round %d: consume after everything ended = %v, want nothing", round, got)
		}
	}
}

// testInboxClaim: what a crashed process held is claimed, once, by the
// next; it is not handed out again by Consume.
func testInboxClaim(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	add(t, ib, "k", `"a"`)
	consume(t, ib, "k")
	h.Crash(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := consume(t, ib, "k"); len(got) != 0 {
		t.Fatalf("consume of a dead holder's item = %v", got)
	}
	if got := claim(t, ib, "k"); !slices.Equal(got, []string{`"a"`}) {
		t.Fatalf("claim = %v, want a", got)
	}
	if got := claim(t, ib, "k"); len(got) != 0 {
		t.Fatalf("second claim = %v, want nothing", got)
	}
}

func testInboxQuarantine(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	bomb := add(t, ib, "k", `"bomb"`)
	add(t, ib, "k", `"fine"`)
	if err := ib.Quarantine(t.Context(), "other", bomb); err != nil {
		t.Fatal(err)
	}
	if got := len(pending(t, ib, "k")); got != 2 {
		t.Fatalf("quarantined under another key: %d pending, want 2", got)
	}
	if err := ib.Quarantine(t.Context(), "k", bomb); err != nil {
		t.Fatal(err)
	}
	h.Crash(t, ib)
	for range 2 {
		ib = h.Open(t, store)
		if got := datas(pending(t, ib, "k")); !slices.Equal(got, []string{`"fine"`}) {
			t.Fatalf("pending = %v, want only fine", got)
		}
		if got := claim(t, ib, "k"); !slices.Equal(got, []string{`"fine"`}) {
			t.Fatalf("claim = %v, want only fine", got)
		}
		q, err := ib.Quarantined(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 1 || q[0].ID != bomb || q[0].Key != "k" || string(q[0].Data) != `"bomb"` {
			t.Fatalf("quarantined = %+v", q)
		}
		ack(t, ib, "k", bomb)
		closeInbox(t, ib)
	}
}
