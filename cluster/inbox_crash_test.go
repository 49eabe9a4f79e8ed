package cluster

import (
	"path/filepath"
	"testing"
)

// crashInbox ends an inbox the way a killed process does: whatever was
// written reaches the file, but the clean-stop record is never written.
func crashInbox(t *testing.T, ib *Inbox) {
	t.Helper()
	if err := ib.f.Close(); err != nil { // no clean-stop record
		t.Fatal(err)
	}
}

func crashesOf(ib *Inbox) map[string]int {
	out := map[string]int{}
	for _, it := range ib.Pending() {
		out[string(it.Data)] = it.Crashes
	}
	return out
}

// TestInboxCountsCrashesOfItemsInFlight: only the items a crashed process
// had accepted or begun to replay are counted; a clean stop counts
// nothing; an item carried over but not touched by the crashed process is
// not counted.
func TestInboxCountsCrashesOfItemsInFlight(t *testing.T) {
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Add(t.Context(), []byte(`"a"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Add(t.Context(), []byte(`"b"`)); err != nil {
		t.Fatal(err)
	}
	crashInbox(t, ib) // first crash: a and b were in flight

	ib, err = OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := crashesOf(ib); got[`"a"`] != 1 || got[`"b"`] != 1 {
		t.Fatalf("after one crash: %v, want a and b at 1", got)
	}
	// The next process replays only a, then crashes: b was not in flight.
	var idA string
	for _, it := range ib.Pending() {
		if string(it.Data) == `"a"` {
			idA = it.ID
		}
	}
	if err := ib.Attempt(t.Context(), []string{idA}); err != nil {
		t.Fatal(err)
	}
	crashInbox(t, ib)

	ib, err = OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := crashesOf(ib); got[`"a"`] != 2 || got[`"b"`] != 1 {
		t.Fatalf("after the second crash: %v, want a at 2, b at 1", got)
	}
	// A clean stop with everything replayed counts nothing.
	var ids []string
	for _, it := range ib.Pending() {
		ids = append(ids, it.ID)
	}
	if err := ib.Attempt(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	if err := ib.Close(); err != nil {
		t.Fatal(err)
	}
	ib, err = OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	if got := crashesOf(ib); got[`"a"`] != 2 || got[`"b"`] != 1 {
		t.Fatalf("after a clean stop: %v, want unchanged", got)
	}
}

// TestInboxQuarantineKeepsTheItem: a quarantined item is never pending
// again, survives reopening and is listed by Quarantined.
func TestInboxQuarantineKeepsTheItem(t *testing.T) {
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	bomb, err := ib.Add(t.Context(), []byte(`"bomb"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ib.Add(t.Context(), []byte(`"fine"`)); err != nil {
		t.Fatal(err)
	}
	if err := ib.Quarantine(t.Context(), bomb); err != nil {
		t.Fatal(err)
	}
	crashInbox(t, ib)
	for range 2 {
		ib, err = OpenInbox(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := ib.Pending(); len(got) != 1 || string(got[0].Data) != `"fine"` {
			t.Fatalf("pending = %+v, want only fine", got)
		}
		if q := ib.Quarantined(); len(q) != 1 || q[0].ID != bomb || string(q[0].Data) != `"bomb"` {
			t.Fatalf("quarantined = %+v", q)
		}
		if err := ib.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
