package clustertest

import (
	"slices"
	"testing"
)

// The inbox suite's crash counting: what a crash, or a lost lease's cut,
// counts against (only items whose work began) and what it leaves alone.

func begin(t *testing.T, ib Inbox, key string, ids ...string) {
	t.Helper()
	if err := ib.Begin(t.Context(), key, ids...); err != nil {
		t.Fatalf("Begin(%s, %v): %v", key, ids, err)
	}
}

// testInboxCrashCount: a crash counts against the items whose work the
// crashed process began (Begin), accepted or taken (Consume, Claim), not
// against items it left alone, and a clean stop counts nothing.
func testInboxCrashCount(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	a := add(t, ib, "ka", `"a"`)
	b := add(t, ib, "kb", `"b"`)
	begin(t, ib, "ka", a)
	begin(t, ib, "kb", b)
	begin(t, ib, "kb", b) // told twice, counted once
	h.Crash(t, ib)        // a and b were executing

	ib = h.Open(t, store)
	if got := crashes(t, ib, "ka", "kb"); got[`"a"`] != 1 || got[`"b"`] != 1 {
		t.Fatalf("after one crash: %v, want a and b at 1", got)
	}
	claim(t, ib, "ka")
	claim(t, ib, "kb")
	begin(t, ib, "ka", a)
	h.Crash(t, ib) // only a was executing again

	ib = h.Open(t, store)
	if got := crashes(t, ib, "ka", "kb"); got[`"a"`] != 2 || got[`"b"`] != 1 {
		t.Fatalf("after the second crash: %v, want a at 2, b at 1", got)
	}
	claim(t, ib, "ka")
	claim(t, ib, "kb")
	begin(t, ib, "ka", a)
	begin(t, ib, "kb", b)
	closeInbox(t, ib)
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := crashes(t, ib, "ka", "kb"); got[`"a"`] != 2 || got[`"b"`] != 1 {
		t.Fatalf("after a clean stop: %v, want unchanged", got)
	}
}

// testInboxWaitingNotBlamed: items that only waited while a process
// crashed (accepted, consumed or claimed, but their work not begun) are
// not blamed for it, however often it happens; an item whose work began
// and ended (acknowledged) leaves nothing behind; Begin of an item not
// pending under the key does nothing.
func testInboxWaitingNotBlamed(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	add(t, ib, "k", `"waits"`)
	add(t, ib, "k2", `"consumed"`)
	done := add(t, ib, "k3", `"done"`)
	consume(t, ib, "k2")
	begin(t, ib, "k3", done)
	ack(t, ib, "k3", done)
	begin(t, ib, "k3", done)
	begin(t, ib, "other", "no-such-id")
	h.Crash(t, ib)
	for range 2 {
		ib = h.Open(t, store)
		claim(t, ib, "k")
		claim(t, ib, "k2")
		h.Crash(t, ib)
	}
	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := crashes(t, ib, "k", "k2", "k3"); len(got) != 2 || got[`"waits"`] != 0 || got[`"consumed"`] != 0 {
		t.Fatalf("after three crashes in which they only waited: %v, want waits and consumed at 0", got)
	}
}

func leave(t *testing.T, ib Inbox, key string, cut bool) {
	t.Helper()
	if err := ib.Leave(t.Context(), key, cut); err != nil {
		t.Fatalf("Leave(%s, %v): %v", key, cut, err)
	}
}

// testInboxLeave: the items a process took and left (its session's lease
// released) are handed to it again by its next take (a Claim, or in a
// shared inbox a Consume too), once, with their crash counts as they
// were; the items of other keys stay in hand.
func testInboxLeave(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	defer closeInbox(t, ib)
	add(t, ib, "k", `"a"`)
	b := add(t, ib, "k", `"b"`)
	add(t, ib, "other", `"o"`)
	consume(t, ib, "k")
	consume(t, ib, "other")
	ack(t, ib, "k", b)
	leave(t, ib, "k", false)
	leave(t, ib, "never-taken", false)
	if got := claim(t, ib, "other"); len(got) != 0 {
		t.Fatalf("claim of a key not left = %v, want nothing (in hand)", got)
	}
	consumed, err := ib.Consume(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := ib.Claim(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	items := append(consumed, claimed...)
	if len(items) != 1 || string(items[0].Data) != `"a"` || items[0].Crashes != 0 {
		t.Fatalf("takes after leave = %+v, want a once with no crash", items)
	}
	if got := append(consume(t, ib, "k"), claim(t, ib, "k")...); len(got) != 0 {
		t.Fatalf("takes again = %v, want nothing", got)
	}
}

// testInboxLeaveCut: an item whose execution a lost lease cut counts one
// crash, as if its process had crashed: twice cut is quarantine's count.
// Leaving twice counts once, an item taken but not begun counts nothing,
// a crash of the process that left it counts nothing more, and one of a
// process that took it again and began it counts.
func testInboxLeaveCut(t *testing.T, h InboxHarness, store string) {
	ib := h.Open(t, store)
	a := add(t, ib, "k", `"a"`)
	c := add(t, ib, "k2", `"c"`)
	add(t, ib, "k", `"waiting"`)
	add(t, ib, "k3", `"untaken"`)
	consume(t, ib, "k")
	consume(t, ib, "k2")
	begin(t, ib, "k", a)
	begin(t, ib, "k2", c)
	leave(t, ib, "k", true)
	leave(t, ib, "k", true)
	leave(t, ib, "k3", true) // nothing taken: nothing cut
	if got := crashes(t, ib, "k", "k3"); got[`"a"`] != 1 || got[`"waiting"`] != 0 || got[`"untaken"`] != 0 {
		t.Fatalf("after a cut: %v, want a at 1, waiting and untaken at 0", got)
	}
	if got := claim(t, ib, "k"); !slices.Equal(got, []string{`"a"`, `"waiting"`}) {
		t.Fatalf("claim after a cut = %v, want a, waiting", got)
	}
	leave(t, ib, "k", true) // claimed, not begun again: not cut
	if got := crashes(t, ib, "k"); got[`"a"`] != 1 {
		t.Fatalf("after a cut of a claimed item not begun: %v, want a at 1", got)
	}
	claim(t, ib, "k")
	begin(t, ib, "k", a)
	leave(t, ib, "k", true)
	if got := crashes(t, ib, "k"); got[`"a"`] != 2 || got[`"waiting"`] != 0 {
		t.Fatalf("after the second cut: %v, want a at 2, waiting at 0", got)
	}
	leave(t, ib, "k2", true)
	h.Crash(t, ib) // a and c were left, not in flight

	ib = h.Open(t, store)
	if got := crashes(t, ib, "k", "k2"); got[`"a"`] != 2 || got[`"c"`] != 1 {
		t.Fatalf("after a crash: %v, want a at 2, c at 1 (left items are not counted again)", got)
	}
	claim(t, ib, "k2")
	begin(t, ib, "k2", c)
	h.Crash(t, ib) // c was taken up again

	ib = h.Open(t, store)
	defer closeInbox(t, ib)
	if got := crashes(t, ib, "k2"); got[`"c"`] != 2 {
		t.Fatalf("after a crash with c taken again: %v, want c at 2", got)
	}
}
