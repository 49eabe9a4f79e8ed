package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	for _, want := range []string{"first", "second, longer than the first", "3"} {
		if err := Write(p, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
	if err := Write(filepath.Join(t.TempDir(), "missing", "x"), []byte("x")); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

// TestConcurrentWriters replays issue #29: writers of one file in one
// directory (replicas on a shared data directory) each succeed, and the
// file holds one of their contents whole. With one temporary name for
// all, a writer renamed the file another had just renamed ("rename
// state.json.tmp state.json: no such file or directory"), or renamed a
// mix of two writes.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	const writers, writes = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*writes)
	for w := range writers {
		wg.Go(func() {
			for i := range writes {
				data := strings.Repeat(strconv.Itoa(w), 100+i)
				if err := Write(p, []byte(data)); err != nil {
					errs <- fmt.Errorf("writer %d, write %d: %w", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got); len(s) < 100 || strings.Trim(s, s[:1]) != "" {
		t.Errorf("the file is not one writer's content: %q", s)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

// TestLockSerializesChanges: read-modify-write under Lock loses no
// increment, though each runs on a file descriptor of its own as separate
// processes would.
func TestLockSerializesChanges(t *testing.T) {
	p := filepath.Join(t.TempDir(), "counter")
	const workers, rounds = 6, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				unlock, err := Lock(p)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := os.ReadFile(p)
				n, _ := strconv.Atoi(string(b))
				if err := Write(p, []byte(strconv.Itoa(n+1))); err != nil {
					t.Error(err)
				}
				unlock()
			}
		})
	}
	wg.Wait()
	b, _ := os.ReadFile(p)
	if string(b) != strconv.Itoa(workers*rounds) {
		t.Errorf("counter %s after %d increments under the lock", b, workers*rounds)
	}
	if _, err := Lock(filepath.Join(t.TempDir(), "missing", "x")); err == nil {
		t.Error("lock in a missing directory succeeded")
	}
}

// TestWriteOpenStepsReportsEachStep: WriteOpenSteps tells each step in
// order, and at each the files are as the step says (what a crash there
// leaves: the inbox compaction's crash points rely on it).
func TestWriteOpenStepsReportsEachStep(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "inbox.jsonl")
	if err := Write(p, []byte("old")); err != nil {
		t.Fatal(err)
	}
	data := []byte("0123456789")
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return string(b)
	}
	temp := func() string {
		tmps, _ := filepath.Glob(TempPattern(p))
		if len(tmps) != 1 {
			return fmt.Sprintf("%d temporary files", len(tmps))
		}
		return read(tmps[0])
	}
	var got []Step
	f, err := WriteOpenSteps(p, data, os.O_APPEND|os.O_WRONLY, func(s Step) {
		got = append(got, s)
		target, tmp := read(p), temp()
		var want [2]string
		switch s {
		case StepPartial:
			want = [2]string{"old", "01234"}
		case StepWritten:
			want = [2]string{"old", "0123456789"}
		case StepRenamed, StepSynced:
			want = [2]string{"0123456789", "0 temporary files"}
		}
		if target != want[0] || tmp != want[1] {
			t.Errorf("at step %d: the file holds %q and the temporary one %q, want %q and %q", s, target, tmp, want[0], want[1])
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if want := []Step{StepPartial, StepWritten, StepRenamed, StepSynced}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if _, err := f.Write([]byte("+")); err != nil || read(p) != "0123456789+" {
		t.Errorf("the handle returned does not append to the new file: %v, %q", err, read(p))
	}
}

// TestBeginStepsReportsEachStep: a Temp from BeginSteps tells StepPartial
// once, after its first Write (what it holds then, not fsynced, beside
// the untouched file), and the others in Commit, with what was written
// after the first Write in the file (the inbox's compaction adds the
// records written meanwhile under its lock, crash points at each step).
func TestBeginStepsReportsEachStep(t *testing.T) {
	for _, first := range []string{"bulk", ""} {
		t.Run(fmt.Sprintf("first %q", first), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "inbox.jsonl")
			if err := Write(p, []byte("old")); err != nil {
				t.Fatal(err)
			}
			var got []string
			tmp, err := BeginSteps(p, func(s Step) {
				b, _ := os.ReadFile(p)
				tmps, _ := filepath.Glob(TempPattern(p))
				in := "none"
				if len(tmps) == 1 {
					c, _ := os.ReadFile(tmps[0])
					in = "[" + string(c) + "]"
				}
				got = append(got, fmt.Sprintf("%d:%s:%s", s, b, in))
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []string{first, "", "+tail"} {
				if err := tmp.Write([]byte(b)); err != nil {
					t.Fatal(err)
				}
			}
			f, err := tmp.Commit(0)
			if err != nil || f != nil {
				t.Fatalf("Commit(0) = %v, %v", f, err)
			}
			whole := first + "+tail"
			want := []string{"0:old:[" + first + "]", "1:old:[" + whole + "]", "2:" + whole + ":none", "3:" + whole + ":none"}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("steps (step:file:temporary file) %v, want %v", got, want)
			}
		})
	}
}
