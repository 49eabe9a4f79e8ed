package groupsync

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/tinyfs"
)

func TestConcurrentWritesAllLand(t *testing.T) {
	g, p := openLog(t)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := []byte(fmt.Sprintf("line %03d\n", i))
			var err error
			if i%2 == 0 {
				err = g.WriteSync(line)
			} else {
				err = g.Write(line)
			}
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if n := bytes.Count(b, []byte("\n")); n != 100 {
		t.Fatalf("%d lines, want 100", n)
	}
	for i := range 100 {
		if !bytes.Contains(b, []byte(fmt.Sprintf("line %03d\n", i))) {
			t.Fatalf("line %d missing or torn", i)
		}
	}
	if err := g.WriteSync([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write after close = %v", err)
	}
}

// TestWritesWaitInMemoryUntilSync: a plain Write makes no syscall; Sync
// writes everything buffered in one go.
func TestWritesWaitInMemoryUntilSync(t *testing.T) {
	g, p := openLog(t)
	if err := g.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("file holds %q before any sync", b)
	}
	wait, err := g.WriteAsync([]byte("b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "a\nb\n" {
		t.Fatalf("after sync the file holds %q", b)
	}
}

// TestFailedSyncPoisonsTheFile: after a failed write or sync, every later
// call fails instead of retrying on the same descriptor (until the
// recovery, which opens the file again).
func TestFailedSyncPoisonsTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := New(f)
	f.Close() // the descriptor goes bad under g
	if err := g.WriteSync([]byte("x\n")); err == nil {
		t.Fatal("sync on a closed descriptor succeeded")
	}
	if err := g.Write([]byte("y\n")); err == nil {
		t.Fatal("write after a failed sync succeeded")
	}
	if err := g.Sync(); err == nil {
		t.Fatal("sync after a failed sync succeeded")
	}
}

// TestPoisonedFileRecovers: after RetryInterval a poisoned file is opened
// again and everything not yet durable is written again, once.
func TestPoisonedFileRecovers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := New(f)
	defer g.Close()
	if err := g.WriteSync([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	f.Close() // the descriptor goes bad under g
	if err := g.WriteSync([]byte("b\n")); err == nil {
		t.Fatal("sync on a closed descriptor succeeded")
	}
	if g.Err() == nil {
		t.Fatal("Err() is nil on a poisoned file")
	}
	time.Sleep(RetryInterval)
	if err := g.WriteSync([]byte("c\n")); err != nil {
		t.Fatalf("write after the retry interval: %v", err)
	}
	if g.Err() != nil {
		t.Fatalf("Err() = %v after recovery", g.Err())
	}
	if b, _ := os.ReadFile(p); string(b) != "a\nb\nc\n" {
		t.Fatalf("file holds %q, want a, b, c once each", b)
	}
}

// TestFullDiskRecovers fills a real (tmpfs) file system: writes fail with
// ENOSPC while it is full and succeed again, without reopening anything by
// hand, once space is freed; what was refused is written exactly once.
func TestFullDiskRecovers(t *testing.T) {
	dir := tinyfs.Mount(t, 256<<10)
	p := filepath.Join(dir, "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := New(f)
	defer g.Close()
	if err := g.WriteSync([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	free := tinyfs.Fill(t, dir)
	big := bytes.Repeat([]byte("x"), 8192)
	big[len(big)-1] = '\n'
	if err := g.WriteSync(big); err == nil {
		t.Fatal("a write on a full disk succeeded")
	}
	if err := g.Write([]byte("refused\n")); err == nil {
		t.Fatal("a poisoned file took a new write")
	}
	time.Sleep(RetryInterval)
	if err := g.Sync(); err == nil {
		t.Fatal("recovery succeeded while the disk is still full")
	}
	free()
	time.Sleep(RetryInterval)
	if err := g.WriteSync([]byte("after\n")); err != nil {
		t.Fatalf("write after space returned: %v", err)
	}
	b, _ := os.ReadFile(p)
	if want := "before\n" + string(big) + "after\n"; string(b) != want {
		t.Fatalf("file holds %d bytes, want %d (before, the big write once, after)", len(b), len(want))
	}
}

// openLog opens a fresh log file in a test directory.
func openLog(t *testing.T) (*File, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := New(f)
	t.Cleanup(func() { _ = g.Close() })
	return g, p
}

// within fails the test unless f returns before the deadline: the calls
// below must not wait for a sync another goroutine holds.
func within(t *testing.T, what string, f func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s waited for another caller's fsync", what)
	}
}

// Regression (issue #15): at 1,000 conversations every run's end asked the
// location index to Sync, and each waited behind whatever fsync of the
// index was running although its own writes were durable long before.
func TestSyncOfDurableWritesWaitsForNobody(t *testing.T) {
	g, _ := openLog(t)
	if err := g.WriteSync([]byte("bound\n")); err != nil {
		t.Fatal(err)
	}
	g.syncMu.Lock() // an fsync in progress for some later write
	defer g.syncMu.Unlock()
	within(t, "Sync", g.Sync)
}

// An inbox acknowledgement (Flush: into the file, no fsync) does not wait
// for the inbound group commit's fsync either; the holder writes it out as
// it lets go.
func TestFlushDuringAnFsyncIsWrittenByItsHolder(t *testing.T) {
	g, p := openLog(t)
	g.syncMu.Lock() // an fsync in progress
	held := true
	defer func() {
		if held { // the test failed: let Close run
			g.syncMu.Unlock()
		}
	}()
	within(t, "Write+Flush", func() error {
		if err := g.Write([]byte("ack\n")); err != nil {
			return err
		}
		return g.Flush()
	})
	if b, _ := os.ReadFile(p); len(b) != 0 {
		t.Fatalf("file holds %q while the fsync runs, want nothing yet", b)
	}
	held = false
	g.unlockSync()
	if b, _ := os.ReadFile(p); string(b) != "ack\n" {
		t.Fatalf("file holds %q once the fsync's caller let go, want the acknowledgement", b)
	}
	// Unheld, Flush writes at once.
	if err := g.Write([]byte("ack2\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.Flush(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "ack\nack2\n" {
		t.Fatalf("file holds %q, want both acknowledgements", b)
	}
}

// TestSyncedBufferIsReused: once written out, the buffer gathers the next
// writes (a line written and synced allocates nothing), and no line is
// overwritten by the ones after it.
func TestSyncedBufferIsReused(t *testing.T) {
	g, p := openLog(t)
	var want bytes.Buffer
	i := 0
	line := make([]byte, 0, 32)
	allocs := testing.AllocsPerRun(100, func() {
		// Not fmt: its printers come from a sync.Pool, which the race
		// detector empties at random, and each refill counted here.
		line = append(strconv.AppendInt(append(line[:0], "line "...), int64(1000+i), 10), '\n')
		i++
		want.Write(line)
		if err := g.Write(line); err != nil {
			t.Fatal(err)
		}
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("a write and its sync allocate %.1f times, want 0", allocs)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("file holds\n%s\nwant\n%s", got, want.Bytes())
	}
}

// TestWriteDuringWriteOutTakesTheSpare: a write that arrives while a group
// is being written out (its buffer taken, as writeOut takes it) starts the
// next group in the spare buffer instead of a new one, and the group
// written out becomes the spare: once warm, nothing is allocated.
func TestWriteDuringWriteOutTakesTheSpare(t *testing.T) {
	g, _ := openLog(t)
	line := []byte("a line of an inbox\n")
	allocs := testing.AllocsPerRun(100, func() {
		if err := g.Write(line); err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		group, _ := g.pend.take() // writeOut takes the group...
		g.mu.Unlock()
		if err := g.Write(line); err != nil { // ...a write arrives meanwhile...
			t.Fatal(err)
		}
		g.mu.Lock()
		g.pend.reuse(group) // ...and the group is written out
		g.mu.Unlock()
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("a group with a write during its write-out allocates %.1f times, want 0", allocs)
	}
}
