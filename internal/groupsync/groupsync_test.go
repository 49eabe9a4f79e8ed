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
