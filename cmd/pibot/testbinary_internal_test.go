package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCachedBinaryConcurrentRuns replays two test runs of one checkout
// starting at once: each builds the test binary into the shared cache
// directory while the other's tests already execute it. A build writes
// its output in two halves with a pause between, as a linker copying a
// large file does. Before, each run built straight into dir/pibot, both
// at once: a run's pibot could be started (here: read) half-written, and
// two builds wrote one file together. Now builds take turns and the
// binary is renamed into place whole.
func TestCachedBinaryConcurrentRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const runs = 6
	contents := make([][]byte, runs)
	for i := range contents {
		// Distinct per run (two runs of one checkout may differ: an edit
		// between them), complete when it ends with its trailer.
		contents[i] = append(bytes.Repeat([]byte{byte('a' + i)}, 64<<10), []byte(fmt.Sprintf("END-%d", i))...)
	}
	whole := func(b []byte) bool {
		for _, c := range contents {
			if bytes.Equal(b, c) {
				return true
			}
		}
		return false
	}
	var building, most atomic.Int32
	build := func(i int) func(out string) error {
		return func(out string) error {
			n := building.Add(1)
			defer building.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
			if err != nil {
				return err
			}
			half := len(contents[i]) / 2
			_, err = f.Write(contents[i][:half])
			time.Sleep(20 * time.Millisecond)
			if err == nil {
				_, err = f.Write(contents[i][half:])
			}
			return errors.Join(err, f.Close())
		}
	}
	stop := make(chan struct{})
	var torn atomic.Int32
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(filepath.Join(dir, "pibot"))
				if err == nil && !whole(b) {
					torn.Add(1)
				}
			}
		})
	}
	var builders sync.WaitGroup
	for i := range runs {
		builders.Go(func() {
			got, err := cachedBinary(dir, build(i))
			if err != nil {
				t.Errorf("run %d: %v", i, err)
				return
			}
			if b, err := os.ReadFile(got); err != nil || !whole(b) {
				t.Errorf("run %d: the binary it got is not a whole build (%v)", i, err)
			}
		})
	}
	builders.Wait()
	close(stop)
	readers.Wait()
	if n := most.Load(); n != 1 {
		t.Errorf("%d builds ran at once into the shared directory, want 1 at a time", n)
	}
	if n := torn.Load(); n > 0 {
		t.Errorf("%d reads of dir/pibot found a half-written binary", n)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "pibot")); err != nil || !whole(b) {
		t.Errorf("dir/pibot after every run is not a whole build (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".pibot.tmp*")); len(left) > 0 {
		t.Errorf("temporary copies left behind: %q", left)
	}
}
