package groupsync

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestConcurrentWritesAllLand(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := New(f)
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
	p := filepath.Join(t.TempDir(), "log")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	g := New(f)
	defer g.Close()
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
// call fails instead of retrying on the same descriptor.
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
