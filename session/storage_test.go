package session_test

import (
	"errors"
	iofs "io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

func TestConformanceFile(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) (session.Storage, string) {
		return session.FileStorage{}, filepath.Join(t.TempDir(), "s")
	})
}

func TestConformanceMemory(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) (session.Storage, string) {
		return session.NewMemStorage(), "/data/s"
	})
}

// TestFileCreateNeverEmpty: a session file exists only with its data. A
// crash between an exclusive create and its write left an empty file,
// which Open refuses and no later create may replace: the conversation
// bound to it could never be loaded again. A reader polling the path
// while it is created sees it missing or whole, never empty, and the
// create leaves no temporary file beside it.
func TestFileCreateNeverEmpty(t *testing.T) {
	dir := t.TempDir()
	data := []byte(`{"type":"session","version":3,"id":"x","timestamp":"2026-12-07T19:00:00.000Z","cwd":"/"}` + "\n")
	var fs session.FileStorage
	for i := range 200 {
		path := filepath.Join(dir, strconv.Itoa(i)+".jsonl")
		done := make(chan struct{})
		saw := make(chan int, 1)
		go func() {
			empty := 0
			for {
				if got, err := os.ReadFile(path); err == nil && len(got) == 0 {
					empty++
				}
				select {
				case <-done:
					saw <- empty
					return
				default:
				}
			}
		}()
		f, err := fs.Create(path, data)
		close(done)
		if err != nil {
			t.Fatal(err)
		}
		if n := <-saw; n > 0 {
			t.Fatalf("create %d: a reader saw the file empty %d times", i, n)
		}
		if _, err := f.Write([]byte("{}\n")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := fs.Create(path, data); !errors.Is(err, iofs.ErrExist) {
			t.Fatalf("second create of %s: %v, want ErrExist", path, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 200 {
		t.Fatalf("%d files in the directory, want 200 (no temporary file left)", len(entries))
	}
	got, err := os.ReadFile(filepath.Join(dir, "7.jsonl"))
	if err != nil || string(got) != string(data)+"{}\n" {
		t.Fatalf("file 7 = %q, %v", got, err)
	}
}
