package fsync

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A goroutine the caller readied just before the fsync runs before the
// caller enters the system call, not after the disk answers. On one P
// the readied goroutine waits in that P's queue; without the yield it
// would run only once the caller blocks. The scheduler takes from its
// global queue now and then, so the order is asked of most rounds.
func TestReadiedGoroutinesRunBeforeTheSync(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const rounds = 200
	first := 0
	for range rounds {
		ready, ran := make(chan struct{}), make(chan struct{})
		go func() {
			<-ready
			close(ran)
		}()
		runtime.Gosched() // the goroutine waits on ready
		ready <- struct{}{}
		var before bool
		err := afterOthers(func() error {
			select {
			case <-ran:
				before = true
			default:
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		<-ran
		if before {
			first++
		}
	}
	if first < rounds*9/10 {
		t.Errorf("the readied goroutine ran before the sync in %d of %d rounds", first, rounds)
	}
}

// Data syncs a file it can and reports a file it cannot.
func TestData(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("line\n"); err != nil {
		t.Fatal(err)
	}
	if err := Data(f); err != nil {
		t.Errorf("Data: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Data(f); err == nil {
		t.Error("Data of a closed file: no error")
	}
}
