package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/internal/atomicfile"
)

// TestInboxCompactionCrashAtEachStep kills the inbox, in effect, at each
// step of a compaction while it runs (the crash points of
// internal/crashpoint: the new file holding the records taken when the
// compaction began, the new file whole with those written meanwhile,
// renamed, the directory fsynced): the data directory is copied as the
// step is reached, on the compaction's goroutine, which is what a restart
// after kill -9 there finds (the page cache survives the process). The
// restart's inbox holds every item the dead one held, once each, the one
// enqueued while the compaction wrote its new file too, with the crash
// counted against the one whose work executed only; after it hands them
// over and acknowledges them nothing comes back. Before, a compaction
// killed before its rename left its temporary file in the data directory
// for good (every such crash one more).
func TestInboxCompactionCrashAtEachStep(t *testing.T) {
	steps := []struct {
		name string
		step atomicfile.Step
		// tmp: the crash leaves the compaction's temporary file.
		tmp bool
	}{
		{"partial", atomicfile.StepPartial, true},
		{"written", atomicfile.StepWritten, true},
		{"renamed", atomicfile.StepRenamed, false},
		{"synced", atomicfile.StepSynced, false},
	}
	for _, tc := range steps {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			p := filepath.Join(dir, "inbox.jsonl")
			ib, err := OpenInboxWith(p, InboxOptions{CompactAfter: 16})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ib.Close() })
			enqueue := func(key string) string {
				t.Helper()
				id, durable, err := ib.Enqueue(ctx, key, []byte(`"`+key+`"`))
				if err == nil {
					err = durable()
				}
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			// Held when the compaction runs: set aside, waiting, taken
			// and waiting behind a run, and executing.
			set := enqueue("q")
			if _, err := ib.Consume(ctx, "q"); err != nil {
				t.Fatal(err)
			}
			if err := ib.Quarantine(ctx, "q", set); err != nil {
				t.Fatal(err)
			}
			waiting := enqueue("w")
			running, taken := enqueue("r"), enqueue("r")
			if _, err := ib.Consume(ctx, "r"); err != nil {
				t.Fatal(err)
			}
			if err := ib.Begin(ctx, "r", running); err != nil {
				t.Fatal(err)
			}
			// The compaction runs on a goroutine of its own: the data
			// directory is copied there, as the step is reached. At
			// its first step, with no lock held, one more item is
			// enqueued: its record is written while the new file is,
			// and must reach it.
			var crashed, meanwhile string
			to := t.TempDir()
			ib.OnCompactStep(func(s atomicfile.Step) {
				if s == atomicfile.StepPartial && meanwhile == "" {
					id, durable, err := ib.Enqueue(ctx, "m", []byte(`"m"`))
					if err == nil {
						err = durable()
					}
					if err != nil {
						t.Error(err)
					}
					meanwhile = id
				}
				if s == tc.step && crashed == "" {
					var err error
					if crashed, err = copyDir(dir, to); err != nil {
						t.Error(err)
					}
				}
			})
			for i := 0; crashed == "" && i < 200; i++ {
				key := fmt.Sprintf("d%d", i%3)
				id := enqueue(key)
				if _, err := ib.Consume(ctx, key); err != nil {
					t.Fatal(err)
				}
				if err := ib.Begin(ctx, key, id); err != nil {
					t.Fatal(err)
				}
				if err := ib.Ack(ctx, key, id); err != nil {
					t.Fatal(err)
				}
				// Nothing else is written while the compaction
				// the Ack may have started runs.
				ib.WaitCompaction()
			}
			if crashed == "" {
				t.Fatal("the inbox never compacted while running")
			}
			cp := filepath.Join(crashed, "inbox.jsonl")
			if tmps, _ := filepath.Glob(atomicfile.TempPattern(cp)); (len(tmps) > 0) != tc.tmp {
				t.Fatalf("temporary files when the compaction died: %q, want some: %v (the test missed its aim)", tmps, tc.tmp)
			}

			// The restart.
			ib2, err := OpenInbox(cp)
			if err != nil {
				t.Fatal(err)
			}
			if tmps, _ := filepath.Glob(atomicfile.TempPattern(cp)); len(tmps) > 0 {
				t.Errorf("the dead compaction's temporary files are still there after the restart: %q", tmps)
			}
			got := map[string]int{}
			for _, it := range ib2.All() {
				if _, twice := got[it.ID]; twice {
					t.Errorf("item %s is pending twice", it.ID)
				}
				got[it.ID] = it.Crashes
			}
			want := map[string]int{waiting: 0, running: 1, taken: 0, meanwhile: 0}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("pending after the crash (id: crashes) = %v, want %v", got, want)
			}
			if q, _ := ib2.Quarantined(ctx); len(q) != 1 || q[0].ID != set {
				t.Errorf("set aside after the crash = %+v, want %s alone", q, set)
			}
			// Each held item is handed over once, and once acknowledged
			// never again.
			handed := 0
			for _, key := range []string{"w", "r", "m", "d0", "d1", "d2"} {
				items, err := ib2.Claim(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range items {
					handed++
					if err := ib2.Ack(ctx, key, it.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			if handed != len(want) {
				t.Errorf("%d items handed over after the restart, want %d", handed, len(want))
			}
			if err := ib2.Close(); err != nil {
				t.Fatal(err)
			}
			ib3, err := OpenInbox(cp)
			if err != nil {
				t.Fatal(err)
			}
			defer ib3.Close()
			if n := ib3.Len(); n != 0 {
				t.Errorf("%d items pending after every held one was acknowledged", n)
			}
		})
	}
}

// copyDir copies the files of dir into to, and returns to (called on
// the compaction's goroutine: no t.Fatal).
func copyDir(dir, to string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			return "", err
		}
	}
	return to, nil
}
