package clustertest

import (
	"slices"
	"testing"
)

func takeable(t *testing.T, ib Inbox, claim bool, ks ...string) []string {
	t.Helper()
	got, err := ib.Takeable(t.Context(), ks, claim)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// testInboxTakeable: Takeable names the keys a take would hand an item,
// each once, whatever else it is asked about: new items for a Consume,
// and for a Claim also what a process left or a dead one held; never the
// keys whose items are all in hand (a run in progress costs the pump's
// poll no take).
func testInboxTakeable(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	want := func(step string, claim bool, w ...string) {
		t.Helper()
		if got := takeable(t, ib, claim, "k1", "k2", "none", "k1"); !slices.Equal(got, w) {
			t.Fatalf("%s: Takeable(claim %v) = %q, want %q", step, claim, got, w)
		}
	}
	both := func(step string, w ...string) {
		t.Helper()
		want(step, false, w...)
		want(step, true, w...)
	}
	if got := takeable(t, ib, false); len(got) != 0 {
		t.Fatalf("Takeable of no keys = %q", got)
	}
	both("empty")
	add(t, ib, "k1", `"a"`)
	add(t, ib, "k2", `"b"`)
	both("two new items", "k1", "k2")
	consume(t, ib, "k1")
	both("k1 in hand", "k2")
	consume(t, ib, "k2")
	both("everything in hand")
	add(t, ib, "k1", `"c"`)
	both("a new item behind one in hand", "k1")
	if got := consume(t, ib, "k1"); !slices.Equal(got, []string{`"c"`}) {
		t.Fatalf("consume = %v, want c", got)
	}
	both("in hand again")
	leave(t, ib, "k2", false)
	want("k2 left", true, "k2")
	if got := append(consume(t, ib, "k2"), claim(t, ib, "k2")...); !slices.Equal(got, []string{`"b"`}) {
		t.Fatalf("takes of k2 after leave = %v, want b", got)
	}
	both("k2 taken again")
	h.Crash(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	want("a dead holder's items", false)
	want("a dead holder's items", true, "k1", "k2")
	claim(t, ib, "k1")
	want("k1 claimed", true, "k2")
	claim(t, ib, "k2")
	both("everything claimed")
}
