package session_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/session"
)

// throughIndexes opens path lazily and read-only through the index the
// lazy open of it left, kept in memory and saved in a directory (a new
// Indexes on it: a restart), and fails when either tree answers anything
// differently from eager.
func throughIndexes(t *testing.T, path string, eager *session.Tree) {
	t.Helper()
	dir := t.TempDir()
	mem := session.NewIndexes(1, 1<<30)
	for _, idx := range []*session.Indexes{mem, session.NewSavedIndexes(dir, 1, 1<<30)} {
		s, err := session.OpenFile(path, session.Options{Lazy: true, ReadOnly: true, Indexes: idx})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := mem.Len(); n != 1 {
		t.Fatalf("%d indexes kept", n)
	}
	if !session.SavedIndexMatches(session.NewSavedIndexes(dir, 1, 1<<30), path) {
		t.Fatal("no saved index matches the file")
	}
	for name, idx := range map[string]*session.Indexes{"kept": mem, "saved": session.NewSavedIndexes(dir, 1, 1<<30)} {
		s, err := session.OpenFile(path, session.Options{Lazy: true, ReadOnly: true, Indexes: idx})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !session.IsLazy(s.Tree()) {
			t.Fatalf("%s: not loaded lazily", name)
		}
		sameTree(t, eager, s.Tree())
		s.Close()
	}
}

// TestSavedIndexServesTheStart: an index saved when a lazy session
// closes serves the first open of its file by a new Indexes on the same
// directory (a restarted pibot), which reads only the lines appended
// since (by that session or by another writer), the two lines it checks
// and the covered part's first and last 4 KiB, and answers what an eager
// load of the file does; Indexes.HighestFence loads it too, for the Open
// that follows.
func TestSavedIndexServesTheStart(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 300 // 51 s under -race at 2,000: the quick loop; 2,000 in --all
	}
	path := generatedFile(t, n, 100)
	dir := t.TempDir()
	opts := func() session.Options {
		return session.Options{Lazy: true, Indexes: session.NewSavedIndexes(dir, 100, 1<<20)}
	}
	s, err := session.OpenFile(path, opts())
	if err != nil {
		t.Fatal(err)
	}
	appendUser(t, s, "appended by the lazy session")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(session.SavedIndexPath(session.NewSavedIndexes(dir, 1, 1), path)); err != nil {
		t.Fatalf("no index saved: %v", err)
	}
	for round, c := range []struct{ other, fence bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		before := fileSize(t, path)
		if c.other { // another writer appends while no pibot runs
			w, err := session.OpenFile(path, session.Options{})
			if err != nil {
				t.Fatal(err)
			}
			appendUser(t, w, "appended by another writer")
			appendUser(t, w, "and one more")
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		appended := fileSize(t, path) - before
		cs := &countingStorage{}
		o := opts()
		if c.fence {
			if _, err := o.Indexes.HighestFence(cs, path); err != nil {
				t.Fatal(err)
			}
		}
		s, err := session.Open(cs, path, o)
		if err != nil {
			t.Fatal(err)
		}
		// The stamp's two windows, and the first and last indexed lines
		// (twice when HighestFence loaded the index for the Open).
		if limit := appended + 2*4096 + 2*(firstEntryLine(t, path)+lineBefore(t, path, before)); cs.read.Load() > limit {
			t.Fatalf("round %d: the start read %d bytes; %d were appended (limit %d)", round, cs.read.Load(), appended, limit)
		}
		eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		sameTree(t, eager.Tree(), s.Tree())
		eager.Close()
		appendUser(t, s, "appended after the start")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSavedIndexMismatch: a saved index that does not match its session
// file (cut, changed at either end, another file or the same bytes in
// another file at the path) or is itself damaged (torn, a byte changed,
// another format version, another file's, empty) is not used: the file
// is read whole, the tree is what an eager load gives, and the saved
// index is removed.
func TestSavedIndexMismatch(t *testing.T) {
	replace := func(t *testing.T, path string, data []byte) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	lastCut := func(full []byte) []byte { return full[:bytes.LastIndexByte(full[:len(full)-1], '\n')+1] }
	inPlace := func(f func(full []byte) []byte) func(t *testing.T, path, _ string) string {
		return func(t *testing.T, path, _ string) string {
			full, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			changed := f(bytes.Clone(full))
			if bytes.Equal(changed, full) {
				t.Fatal("nothing changed")
			}
			if err := os.WriteFile(path, changed, 0o600); err != nil { // the same inode
				t.Fatal(err)
			}
			return path
		}
	}
	index := func(f func(t *testing.T, idx []byte) []byte) func(t *testing.T, path, saved string) string {
		return func(t *testing.T, path, saved string) string {
			b, err := os.ReadFile(saved)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(saved, f(t, b), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path, saved string) string // returns the path to open
	}{
		{"file shorter", inPlace(lastCut)},
		{"same size, last line changed", inPlace(func(full []byte) []byte {
			return bytes.Replace(full, []byte("to be cut"), []byte("to be CUT"), 1)
		})},
		{"longer, last indexed line changed", inPlace(func(full []byte) []byte {
			return append(bytes.Replace(full, []byte("to be cut"), []byte("to be CUT"), 1), full[bytes.LastIndexByte(full[:len(full)-1], '\n')+1:]...)
		})},
		{"cut and grown again", inPlace(func(full []byte) []byte {
			cut := lastCut(full)
			return append(append(cut, bytes.Repeat([]byte(" "), len(full)-len(cut)-1)...), '\n')
		})},
		{"header changed", inPlace(func(full []byte) []byte {
			i := bytes.Index(full, []byte(`"id":"`)) + len(`"id":"`)
			full[i] ^= 1
			return full
		})},
		{"another session at the path", func(t *testing.T, path, _ string) string {
			replace(t, path, generated(t, 700, 11))
			return path
		}},
		{"the same bytes, another file", func(t *testing.T, path, _ string) string {
			full, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			replace(t, path, full)
			return path
		}},
		{"index torn", index(func(_ *testing.T, b []byte) []byte { return b[:len(b)/2] })},
		{"index byte changed", index(func(_ *testing.T, b []byte) []byte { b[len(b)/2] ^= 0x10; return b })},
		{"index of another version", index(func(_ *testing.T, b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 99); return b })},
		{"index empty", index(func(_ *testing.T, b []byte) []byte { return nil })},
		{"index of another file", func(t *testing.T, path, saved string) string {
			// A hard link: the same file, so only the saved path differs.
			other := filepath.Join(t.TempDir(), "other.jsonl")
			if err := os.Link(path, other); err != nil {
				t.Skipf("no hard links: %v", err)
			}
			b, err := os.ReadFile(saved)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(session.SavedIndexPath(session.NewSavedIndexes(filepath.Dir(saved), 1, 1), other), b, 0o600); err != nil {
				t.Fatal(err)
			}
			return other
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 600
			if testing.Short() {
				n = 200 // the quick loop under -race; 600 in --all
			}
			path := generatedFile(t, n, 100)
			dir := t.TempDir()
			s, err := session.OpenFile(path, session.Options{Lazy: true, Indexes: session.NewSavedIndexes(dir, 1, 1<<20)})
			if err != nil {
				t.Fatal(err)
			}
			appendUser(t, s, "to be cut")
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			idx := session.NewSavedIndexes(dir, 1, 1<<20)
			if !session.SavedIndexMatches(idx, path) {
				t.Fatal("no index saved")
			}
			path = c.change(t, path, session.SavedIndexPath(idx, path))
			saved := session.SavedIndexPath(idx, path)
			cs := &countingStorage{}
			s2, err := session.Open(cs, path, session.Options{Lazy: true, ReadOnly: true, Indexes: idx})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if size := fileSize(t, path); cs.read.Load() < size {
				t.Fatalf("read %d of %d bytes: the saved index served", cs.read.Load(), size)
			}
			if _, err := os.Stat(saved); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the saved index is still there: %v", err)
			}
			eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer eager.Close()
			sameTree(t, eager.Tree(), s2.Tree())
		})
	}
}

// TestSavedIndexLeftOver: a temporary file a crash left while an index
// was saved is never read, and the next save replaces the index.
func TestSavedIndexLeftOver(t *testing.T) {
	path := generatedFile(t, 300, 100)
	dir := t.TempDir()
	idx := session.NewSavedIndexes(dir, 1, 1<<20)
	saved := session.SavedIndexPath(idx, path)
	if err := os.WriteFile(filepath.Join(dir, "."+filepath.Base(saved)+".tmp123"), []byte("pibotidx torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if session.SavedIndexMatches(idx, path) {
		t.Fatal("a left-over temporary file served")
	}
	s, err := session.OpenFile(path, session.Options{Lazy: true, Indexes: idx})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !session.SavedIndexMatches(session.NewSavedIndexes(dir, 1, 1<<20), path) {
		t.Fatal("no index saved")
	}
}

// firstEntryLine is the length of the file's second line (its first
// entry's) with its newline.
func firstEntryLine(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first := bytes.IndexByte(data, '\n') + 1
	return int64(bytes.IndexByte(data[first:], '\n') + 1)
}

// lineBefore is the length, with its newline, of the file's line that
// ends at offset end.
func lineBefore(t *testing.T, path string, end int64) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return end - int64(bytes.LastIndexByte(data[:end-1], '\n')+1)
}
