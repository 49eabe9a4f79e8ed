package session

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFileSizeAllocatesNothing: the size check before every session write
// is an fstat into the stack, and it sees what another writer appended.
func TestFileSizeAllocatesNothing(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "s.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("{}\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := fileSize(f); err != nil || n != 3 {
		t.Fatalf("fileSize = %d, %v; want 3", n, err)
	}
	other, err := os.OpenFile(f.Name(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.WriteString("{\"x\":1}\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := fileSize(f); err != nil || n != 11 {
		t.Fatalf("after another writer: fileSize = %d, %v; want 11", n, err)
	}
	if a := testing.AllocsPerRun(100, func() { _, _ = osFile{f}.Size() }); a != 0 {
		t.Errorf("%v allocations per size check", a)
	}
}
