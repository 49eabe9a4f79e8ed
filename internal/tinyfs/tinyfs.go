// Package tinyfs gives tests a real file system that can run out of
// space: a small tmpfs mounted for the test (root only), and a filler
// that takes every free byte until it is removed.
package tinyfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Fill writes a file in dir until the file system is full and returns a
// function that removes it, freeing the space.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatalf("tinyfs: %v", err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("tinyfs: filling %s: %v", dir, err)
			}
			break
		}
	}
	// Take the last partial block too.
	for {
		if _, err := f.Write(chunk[:1]); err != nil {
			break
		}
	}
	_ = f.Close()
	return func() {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("tinyfs: %v", err)
		}
	}
}
