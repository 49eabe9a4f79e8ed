package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/atomicfile"
)

// TestInboxCompactsWhileRunning delivers many messages through one
// inbox: the file is compacted while it runs, so it holds what is still
// pending, not the history. Then the process "crashes" (the file is
// opened again without Close): the item whose work executed counts one
// crash, the one that only waited none, the quarantined item stays set
// aside, as they would without the compaction.
func TestInboxCompactsWhileRunning(t *testing.T) {
	ctx := t.Context()
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := cluster.OpenInboxWith(p, cluster.InboxOptions{CompactAfter: 64})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(key, data string) string {
		t.Helper()
		id, durable, err := ib.Enqueue(ctx, key, []byte(data))
		if err == nil {
			err = durable()
		}
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	quarantined := enqueue("q", `"poison"`)
	if _, err := ib.Consume(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if err := ib.Quarantine(ctx, "q", quarantined); err != nil {
		t.Fatal(err)
	}
	waiting := enqueue("w", `"waits"`)
	running := enqueue("r", `"runs"`)
	if _, err := ib.Consume(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := ib.Begin(ctx, "r", running); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf(`"%0500d"`, 0) // about the size of a chat message's item
	for i := range 2000 {
		key := fmt.Sprintf("k%d", i%7)
		id := enqueue(key, line)
		if _, err := ib.Consume(ctx, key); err != nil {
			t.Fatal(err)
		}
		if err := ib.Begin(ctx, key, id); err != nil {
			t.Fatal(err)
		}
		if err := ib.Ack(ctx, key, id); err != nil {
			t.Fatal(err)
		}
	}
	ib.WaitCompaction()
	if err := ib.Sync(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	// 2,000 messages of 4 records, about 600 bytes each, uncompacted:
	// over 1.2 MB. Compacted every 64 records or so: a few dozen lines.
	if st.Size() > 64*700 {
		t.Errorf("inbox file is %d bytes after 2,000 delivered messages: not compacted while running", st.Size())
	}

	// A crash: reopened without Close.
	ib2, err := cluster.OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ib2.Close()
	got := map[string]int{}
	for _, it := range ib2.All() {
		got[it.ID] = it.Crashes
	}
	want := map[string]int{waiting: 0, running: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pending after the crash (id: crashes) = %v, want %v", got, want)
	}
	q, _ := ib2.Quarantined(ctx)
	if len(q) != 1 || q[0].ID != quarantined {
		t.Errorf("quarantined after the crash = %+v, want %s", q, quarantined)
	}
}

// TestInboxCompactsUnderConcurrentWriters enqueues and acknowledges from
// many goroutines while the file is compacted again and again: nothing
// enqueued is lost and nothing acknowledged comes back.
func TestInboxCompactsUnderConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := cluster.OpenInboxWith(p, cluster.InboxOptions{CompactAfter: 32})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	kept := map[string]bool{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", g)
			for i := range 300 {
				id, durable, err := ib.Enqueue(ctx, key, []byte(`"x"`))
				if err == nil {
					err = durable()
				}
				if err != nil {
					t.Error(err)
					return
				}
				if i%10 == 0 {
					mu.Lock()
					kept[id] = true
					mu.Unlock()
					continue
				}
				if err := ib.Ack(ctx, key, id); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ib.Close(); err != nil {
		t.Fatal(err)
	}
	ib2, err := cluster.OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ib2.Close()
	all := ib2.All()
	if len(all) != len(kept) {
		t.Errorf("%d items pending after reopen, want %d", len(all), len(kept))
	}
	for _, it := range all {
		if !kept[it.ID] {
			t.Errorf("item %s pending after reopen, but it was acknowledged", it.ID)
		}
	}
}

// TestInboxWritesGoOnDuringACompaction: while a compaction writes and
// syncs the new file, items are enqueued (durably), taken, begun and
// acknowledged without waiting for it (the compaction took the inbox's
// lock for all of it, and at 1,000 busy conversations every accepted
// message then waited for the whole file to be encoded, written and
// synced: the stress tail of issue #34), and what they wrote is in the
// file that replaces the old one: after a crash, the item enqueued
// meanwhile is pending, the one begun meanwhile counts a crash, the one
// acknowledged meanwhile is gone.
func TestInboxWritesGoOnDuringACompaction(t *testing.T) {
	ctx := t.Context()
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := cluster.OpenInboxWith(p, cluster.InboxOptions{CompactAfter: 16})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(key string) string {
		id, durable, err := ib.Enqueue(ctx, key, []byte(`"x"`))
		if err == nil {
			err = durable()
		}
		if err != nil {
			t.Error(err)
		}
		return id
	}
	before := enqueue("b") // pending when the compaction starts
	var waited, begun, acked string
	var hooked sync.Once
	done := make(chan struct{}) // the writes made during the compaction
	ib.OnCompactStep(func(s atomicfile.Step) {
		if s != atomicfile.StepPartial { // the new file being written, no lock held
			return
		}
		hooked.Do(func() {
			go func() {
				defer close(done)
				waited = enqueue("w")
				begun = enqueue("r")
				if _, err := ib.Consume(ctx, "r"); err != nil {
					t.Error(err)
				}
				if err := ib.Begin(ctx, "r", begun); err != nil {
					t.Error(err)
				}
				acked = enqueue("a")
				if err := ib.Ack(ctx, "a", acked); err != nil {
					t.Error(err)
				}
				if err := ib.Ack(ctx, "b", before); err != nil {
					t.Error(err)
				}
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("writes to the inbox waited for a compaction writing its file")
			}
		})
	})
	for i := 0; i < 64; i++ { // delivered items: compactions are due
		key := fmt.Sprintf("k%d", i%3)
		id := enqueue(key)
		if err := ib.Ack(ctx, key, id); err != nil {
			t.Fatal(err)
		}
	}
	ib.WaitCompaction()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no compaction ran")
	}
	if t.Failed() {
		return
	}

	ib2, err := cluster.OpenInbox(p) // a crash: no Close
	if err != nil {
		t.Fatal(err)
	}
	defer ib2.Close()
	got := map[string]int{}
	for _, it := range ib2.All() {
		got[it.ID] = it.Crashes
	}
	want := map[string]int{waited: 0, begun: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pending after the crash (id: crashes) = %v, want %v (enqueued during the compaction %s, begun %s, acknowledged %s and %s)",
			got, want, waited, begun, acked, before)
	}
	if err := ib.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestInboxOpenReadsLongLines reopens an inbox holding an item longer
// than the buffer it is streamed through: the item comes back whole.
func TestInboxOpenReadsLongLines(t *testing.T) {
	ctx := t.Context()
	p := filepath.Join(t.TempDir(), "inbox.jsonl")
	ib, err := cluster.OpenInbox(p)
	if err != nil {
		t.Fatal(err)
	}
	long := fmt.Sprintf(`"%0300000d"`, 7)
	id, durable, err := ib.Enqueue(ctx, "k", []byte(long))
	if err == nil {
		err = durable()
	}
	if err != nil {
		t.Fatal(err)
	}
	short, durable, err := ib.Enqueue(ctx, "k", []byte(`"short"`))
	if err == nil {
		err = durable()
	}
	if err != nil {
		t.Fatal(err)
	}
	ib2, err := cluster.OpenInbox(p) // a crash: no Close
	if err != nil {
		t.Fatal(err)
	}
	defer ib2.Close()
	all := ib2.All()
	if len(all) != 2 || all[0].ID != id || string(all[0].Data) != long || all[1].ID != short {
		t.Fatalf("after reopen: %d items (first %d bytes), want the long item and the short one", len(all), len(all[0].Data))
	}
}
