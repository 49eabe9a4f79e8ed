package session_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

// sameTree fails when the lazily loaded tree lazy answers anything
// differently from the eager one: header, heads, labels, name, every
// entry, the roots, and at sampled leaves the branch, the context (as
// pi's JSON and decoded), a BranchCache's context and BranchBack's walk.
func sameTree(t *testing.T, eager, lazy *session.Tree) {
	t.Helper()
	if !reflect.DeepEqual(eager.Header(), lazy.Header()) {
		t.Fatalf("header %+v, eager %+v", lazy.Header(), eager.Header())
	}
	if eager.Len() != lazy.Len() || eager.Leaf() != lazy.Leaf() || eager.Name() != lazy.Name() {
		t.Fatalf("len %d leaf %q name %q, eager %d %q %q", lazy.Len(), lazy.Leaf(), lazy.Name(), eager.Len(), eager.Leaf(), eager.Name())
	}
	if !reflect.DeepEqual(eager.Heads(), lazy.Heads()) {
		t.Fatalf("heads %v, eager %v", lazy.Heads(), eager.Heads())
	}
	if !reflect.DeepEqual(eager.Labels(), lazy.Labels()) {
		t.Fatalf("labels %v, eager %v", lazy.Labels(), eager.Labels())
	}
	want, got := eager.Entries(), lazy.Entries()
	if !reflect.DeepEqual(want, got) {
		for i := range min(len(want), len(got)) {
			if !reflect.DeepEqual(want[i], got[i]) {
				t.Fatalf("entry %d: %+v, eager %+v", i, got[i], want[i])
			}
		}
		t.Fatalf("entries: %d, eager %d", len(got), len(want))
	}
	if !reflect.DeepEqual(eager.Roots(), lazy.Roots()) {
		t.Fatal("roots differ")
	}
	every := max(1, len(want)/8)
	leaves := []string{""}
	for i, e := range want {
		if i%every == 0 || i == len(want)-1 {
			leaves = append(leaves, e.ID)
		}
	}
	for i, leaf := range leaves {
		sameAt(t, eager, lazy, leaf, i < 3)
	}
}

// sameIndex is sameTree without the entries' bodies: header, length,
// leaf, heads, labels, name, and the context at the default leaf.
func sameIndex(t *testing.T, eager, lazy *session.Tree) {
	t.Helper()
	if !reflect.DeepEqual(eager.Header(), lazy.Header()) || eager.Len() != lazy.Len() || eager.Leaf() != lazy.Leaf() ||
		eager.Name() != lazy.Name() || !reflect.DeepEqual(eager.Heads(), lazy.Heads()) || !reflect.DeepEqual(eager.Labels(), lazy.Labels()) {
		t.Fatalf("index differs: len %d leaf %q heads %v, eager %d %q %v", lazy.Len(), lazy.Leaf(), lazy.Heads(), eager.Len(), eager.Leaf(), eager.Heads())
	}
	sameAt(t, eager, lazy, "", false)
}

// sameAt compares what the two trees answer at one leaf; the branch, whose
// every entry is decoded, only when branch is true.
func sameAt(t *testing.T, eager, lazy *session.Tree, leaf string, branch bool) {
	t.Helper()
	if branch {
		wb, werr := eager.Branch(leaf)
		gb, gerr := lazy.Branch(leaf)
		if !reflect.DeepEqual(wb, gb) || (werr == nil) != (gerr == nil) {
			t.Fatalf("leaf %q: branch differs (%v, eager %v)", leaf, gerr, werr)
		}
	}
	wc, werr := eager.Context(leaf)
	gc, gerr := lazy.Context(leaf)
	if werr != nil || gerr != nil {
		t.Fatalf("leaf %q: context: %v, eager %v", leaf, gerr, werr)
	}
	wj, _ := wc.MarshalJSON()
	gj, _ := gc.MarshalJSON()
	if !bytes.Equal(wj, gj) {
		t.Fatalf("leaf %q: context JSON differs\n got %.300s\nwant %.300s", leaf, gj, wj)
	}
	wm, werr := wc.LLMMessages()
	gm, gerr := gc.LLMMessages()
	if werr != nil || gerr != nil || !reflect.DeepEqual(wm, gm) {
		t.Fatalf("leaf %q: LLM messages differ (%v, eager %v)", leaf, gerr, werr)
	}
	var wcache, gcache session.BranchCache
	wbc, werr := wcache.Context(eager, leaf)
	gbc, gerr := gcache.Context(lazy, leaf)
	if werr != nil || gerr != nil || !reflect.DeepEqual(wbc, gbc) {
		t.Fatalf("leaf %q: branch cache context differs (%v, eager %v)", leaf, gerr, werr)
	}
	var wenv, genv []session.Entry
	for e := range eager.BranchBack(leaf) {
		if e.Type == session.TypeMessage {
			e.Raw = nil // a lazy tree reads no message on the walk
		}
		wenv = append(wenv, e)
	}
	for e := range lazy.BranchBack(leaf) {
		if e.Type == session.TypeMessage {
			e.Raw = nil
		}
		genv = append(genv, e)
	}
	if !reflect.DeepEqual(wenv, genv) {
		t.Fatalf("leaf %q: BranchBack differs", leaf)
	}
}

// openBoth opens path read-only eagerly and lazily.
func openBoth(t *testing.T, path string) (eager, lazy *session.Session) {
	t.Helper()
	eager, eerr := session.OpenFile(path, session.Options{ReadOnly: true})
	lazy, lerr := session.OpenFile(path, session.Options{ReadOnly: true, Lazy: true})
	if (eerr == nil) != (lerr == nil) {
		t.Fatalf("open: lazy %v, eager %v", lerr, eerr)
	}
	if eerr != nil {
		if eerr.Error() != lerr.Error() {
			t.Fatalf("open: lazy %v, eager %v", lerr, eerr)
		}
		return nil, nil
	}
	t.Cleanup(func() { eager.Close(); lazy.Close() })
	return eager, lazy
}

// TestLazyMatchesEager is the conformance table of the lazy loader: over
// pi's files and generated ones (with and without compactions, several
// read chunks, ids the generator repeats) the lazy tree answers what the
// eager one does, loaded from the file, through the index kept of it in
// memory and through the index saved of it (throughIndexes), and a file the eager loader reports damage in (or
// migrates) is loaded eagerly.
func TestLazyMatchesEager(t *testing.T) {
	type tc struct {
		name string
		path string
	}
	var cases []tc
	if dir, ok := piVectors(t); ok {
		files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range files {
			name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
			if testing.Short() && name == "deep-chain" {
				continue // 17 s under -race; in --all
			}
			if !strings.Contains(name, ".") {
				cases = append(cases, tc{"pi/" + name, p})
			}
		}
	}
	// Generate's own compactions (every 0) are rare: 1 in 6,000 entries.
	gens := []struct{ n, every int }{{50, -1}, {300, 0}, {2000, -1}, {2000, 100}, {6000, 0}}
	if testing.Short() { // the 2,000s and the 6,000 in --all
		gens = gens[:2]
	}
	for i, g := range gens {
		var b bytes.Buffer
		if err := sessiontest.GenerateWith(&b, g.n, uint64(i+1), sessiontest.GenOptions{CompactEvery: g.every}); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, tc{fmt.Sprintf("gen/%d/compact%d", g.n, g.every), writeTemp(t, b.Bytes())})
	}
	lazyCount := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eager, lazy := openBoth(t, c.path)
			if eager == nil {
				return
			}
			if !reflect.DeepEqual(eager.Report(), lazy.Report()) {
				t.Fatalf("report %+v, eager %+v", lazy.Report(), eager.Report())
			}
			r := eager.Report()
			wantLazy := r.Clean() && r.FromVersion == session.CurrentVersion
			if session.IsLazy(lazy.Tree()) != wantLazy {
				t.Fatalf("loaded lazily: %v, want %v (report %+v)", session.IsLazy(lazy.Tree()), wantLazy, r)
			}
			if !wantLazy {
				return // both loaded eagerly (a migration draws new ids)
			}
			lazyCount++
			sameTree(t, eager.Tree(), lazy.Tree())
			throughIndexes(t, c.path, eager.Tree())
		})
	}
	if lazyCount < len(cases)-4 {
		t.Fatalf("only %d files loaded lazily", lazyCount)
	}
}

// piVectors finds shared/testdata/pi (see vectorsDir) without skipping.
func piVectors(t *testing.T) (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		for _, cand := range []string{filepath.Join(dir, "shared", "testdata", "pi"), filepath.Join(dir, "..", "shared", "testdata", "pi")} {
			if _, err := os.Stat(filepath.Join(cand, "manifest.json")); err == nil {
				return cand, true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// countingStorage is the file system counting the bytes read from files.
type countingStorage struct {
	session.FileStorage
	read atomic.Int64
}

func (c *countingStorage) ReadFile(path string) ([]byte, error) {
	b, err := c.FileStorage.ReadFile(path)
	c.read.Add(int64(len(b)))
	return b, err
}

func (c *countingStorage) OpenRange(path string) (session.RangeFile, error) {
	f, err := c.FileStorage.OpenRange(path)
	if err != nil {
		return nil, err
	}
	return countingRange{f, c}, nil
}

type countingRange struct {
	session.RangeFile
	c *countingStorage
}

// FileID passes the file's identity on, for the saved indexes.
func (r countingRange) FileID() (dev, ino uint64, ok bool) {
	if fi, is := r.RangeFile.(session.FileIdentifier); is {
		return fi.FileID()
	}
	return 0, 0, false
}

func (r countingRange) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.RangeFile.ReadAt(p, off)
	r.c.read.Add(int64(n))
	return n, err
}

func generatedFile(t *testing.T, n, every int) string {
	t.Helper()
	var b bytes.Buffer
	if err := sessiontest.GenerateWith(&b, n, 7, sessiontest.GenOptions{CompactEvery: every}); err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, b.Bytes())
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// lastLine is the length of the file's last line with its newline.
func lastLine(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(data) - bytes.LastIndexByte(data[:len(data)-1], '\n') - 1)
}

// appendUser appends a user message at the default leaf of s.
func appendUser(t *testing.T, s *session.Session, text string) {
	t.Helper()
	m := llm.UserText(text, 1700000000000)
	if _, err := s.Append(session.Entry{Type: session.TypeMessage, ParentID: s.Tree().Leaf(), Message: &m, Pibot: &session.Meta{Loc: "chat:1"}}, session.SyncAlways); err != nil {
		t.Fatal(err)
	}
}

// TestLazyReopenReadsTheTail: an index kept when a lazy session closes
// serves its next open, which reads only the lines appended since (by
// that session or by another writer) and the two lines it checks, and
// answers what an eager load of the file does.
func TestLazyReopenReadsTheTail(t *testing.T) {
	path := generatedFile(t, 2000, 100)
	cs := &countingStorage{}
	idx := session.NewIndexes(100, 1<<20)
	opts := session.Options{Lazy: true, Indexes: idx}
	s, err := session.Open(cs, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !session.IsLazy(s.Tree()) {
		t.Fatal("not loaded lazily")
	}
	if got, size := cs.read.Load(), fileSize(t, path); got < size {
		t.Fatalf("first open read %d of %d bytes", got, size)
	}
	appendUser(t, s, "appended by the lazy session")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n, _ := idx.Len(); n != 1 {
		t.Fatalf("%d indexes kept, want 1", n)
	}
	firstLine := int64(0)
	if data, err := os.ReadFile(path); err == nil {
		first := bytes.IndexByte(data, '\n') + 1
		firstLine = int64(bytes.IndexByte(data[first:], '\n') + 1)
	}

	for round, other := range []bool{false, true, false} {
		before := fileSize(t, path)
		if other { // another writer appends while the session is closed
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
		cs.read.Store(0)
		s, err := session.Open(cs, path, opts)
		if err != nil {
			t.Fatal(err)
		}
		if limit := appended + firstLine + lastLine(t, path); cs.read.Load() > limit {
			t.Fatalf("round %d: reopen read %d bytes; %d were appended (limit %d)", round, cs.read.Load(), appended, limit)
		}
		eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		sameIndex(t, eager.Tree(), s.Tree())
		eager.Close()
		appendUser(t, s, fmt.Sprintf("round %d", round))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLazyFileChangedUnderIndex: a message line changed on disk under a
// lazily loaded tree is never served: reads fail with ErrFileChanged. A
// file cut shorter than a kept index is loaded anew.
func TestLazyFileChangedUnderIndex(t *testing.T) {
	path := generatedFile(t, 500, -1)
	s, err := session.OpenFile(path, session.Options{Lazy: true, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	leaf := s.Tree().Leaf()
	var msg session.Entry
	for e := range s.Tree().BranchBack(leaf) {
		if e.Type == session.TypeMessage {
			msg = e
			break
		}
	}
	full, ok := s.Tree().Get(msg.ID)
	if !ok || full.Message == nil {
		t.Fatalf("entry %s not read", msg.ID)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, full.Raw)
	if at < 0 {
		t.Fatal("line not found")
	}
	// One character of the message, the same length: only its bytes differ.
	k := bytes.Index(full.Raw, []byte(`"content":`))
	changed := bytes.Clone(data)
	changed[at+k+1] ^= 0x20 // "content" → "Content"
	if err := os.WriteFile(path, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Tree().Get(msg.ID); ok {
		t.Error("Get served a changed line")
	}
	if _, err := s.Tree().Context(leaf); !errors.Is(err, session.ErrFileChanged) {
		t.Errorf("Context: %v, want ErrFileChanged", err)
	}
	if _, err := s.Tree().Branch(leaf); !errors.Is(err, session.ErrFileChanged) {
		t.Errorf("Branch: %v, want ErrFileChanged", err)
	}
	var cache session.BranchCache
	if _, err := cache.Context(s.Tree(), leaf); !errors.Is(err, session.ErrFileChanged) {
		t.Errorf("BranchCache: %v, want ErrFileChanged", err)
	}

	// Cut or changed: a kept index of the file as it was must not serve.
	for _, c := range []struct {
		name   string
		change func(full []byte) []byte
	}{
		{"shorter", func(full []byte) []byte { return full[:bytes.LastIndexByte(full[:len(full)-1], '\n')+1] }},
		{"same size, last line changed", func(full []byte) []byte {
			return bytes.Replace(full, []byte("to be cut"), []byte("to be CUT"), 1)
		}},
		{"longer, last line changed", func(full []byte) []byte {
			return append(bytes.Replace(full, []byte("to be cut"), []byte("to be CUT"), 1), full[bytes.LastIndexByte(full[:len(full)-1], '\n')+1:]...)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			idx := session.NewIndexes(1, 1<<20)
			s2, err := session.OpenFile(path, session.Options{Lazy: true, Indexes: idx})
			if err != nil {
				t.Fatal(err)
			}
			appendUser(t, s2, "to be cut")
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			full, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			changed := c.change(full)
			if bytes.Equal(changed, full) {
				t.Fatal("nothing changed")
			}
			if err := os.WriteFile(path, changed, 0o600); err != nil {
				t.Fatal(err)
			}
			cs := &countingStorage{}
			s3, err := session.Open(cs, path, session.Options{Lazy: true, Indexes: idx, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s3.Close()
			if cs.read.Load() < int64(len(changed)) {
				t.Fatalf("read %d of %d bytes: the kept index served", cs.read.Load(), len(changed))
			}
			eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer eager.Close()
			sameIndex(t, eager.Tree(), s3.Tree())
		})
	}
}

// TestLazyWritesTheSameBytes: appends to a lazily opened file write
// what they write to an eagerly opened one.
func TestLazyWritesTheSameBytes(t *testing.T) {
	data := generated(t, 300, 9)
	var files [2][]byte
	for i, lazy := range []bool{false, true} {
		path := writeTemp(t, data)
		s, err := session.OpenFile(path, session.Options{Lazy: lazy, Now: fixedNow, Fence: 3})
		if err != nil {
			t.Fatal(err)
		}
		if session.IsLazy(s.Tree()) != lazy {
			t.Fatalf("lazy %v: loaded lazily %v", lazy, session.IsLazy(s.Tree()))
		}
		for j := range 3 {
			m := llm.UserText(fmt.Sprintf("message %d", j), 1700000000000)
			e := session.Entry{Type: session.TypeMessage, ID: fmt.Sprintf("new%05d", j), ParentID: s.Tree().Leaf(), Message: &m}
			if _, err := s.Append(e, session.SyncGrouped); err != nil {
				t.Fatal(err)
			}
		}
		head := session.Entry{Type: session.TypeCustom, CustomType: session.CustomHead, ID: "head0001", ParentID: s.Tree().First(1)[0].ID, Pibot: &session.Meta{Loc: "chat:1"}}
		if _, err := s.Append(head, session.SyncAlways); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if files[i], err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("the lazily opened file was written differently")
	}
	if len(files[0]) <= len(data) {
		t.Fatal("nothing was appended")
	}
}

func fixedNow() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }

// TestIndexesHighestFence: with an index kept of the file, the highest
// fence is what session.HighestFence reads, found by reading only the
// lines appended since (and the two it checks); without one, or once
// the file changed under it, the whole file is read.
func TestIndexesHighestFence(t *testing.T) {
	path := generatedFile(t, 300, 100)
	idx := session.NewIndexes(1, 1<<20)
	s, err := session.OpenFile(path, session.Options{Lazy: true, Indexes: idx, Fence: 4})
	if err != nil {
		t.Fatal(err)
	}
	appendUser(t, s, "fenced 4")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cs := &countingStorage{}
	check := func(name string, limit int64) {
		t.Helper()
		want, err := session.HighestFence(session.FileStorage{}, path)
		if err != nil {
			t.Fatal(err)
		}
		cs.read.Store(0)
		got, err := idx.HighestFence(cs, path)
		if err != nil || got != want {
			t.Fatalf("%s: fence %d (%v), want %d", name, got, err, want)
		}
		if limit >= 0 && cs.read.Load() > limit {
			t.Fatalf("%s: read %d bytes, limit %d", name, cs.read.Load(), limit)
		}
		if limit < 0 && cs.read.Load() < fileSize(t, path) {
			t.Fatalf("%s: read %d of %d bytes: the kept index answered", name, cs.read.Load(), fileSize(t, path))
		}
	}
	check("kept", 8<<10)
	w, err := session.OpenFile(path, session.Options{Fence: 9})
	if err != nil {
		t.Fatal(err)
	}
	appendUser(t, w, "fenced 9 by another writer")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check("appended", 8<<10)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut the last two lines: the kept index's last entry is gone.
	data = data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1]
	data = data[:bytes.LastIndexByte(data[:len(data)-1], '\n')+1]
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	check("cut", -1)
	// The index that answered is the one the Open after it takes.
	cs.read.Store(0)
	s2, err := session.Open(cs, path, session.Options{Lazy: true, Indexes: idx})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if cs.read.Load() > 8<<10 {
		t.Fatalf("open after HighestFence read %d bytes", cs.read.Load())
	}
	eager, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer eager.Close()
	sameIndex(t, eager.Tree(), s2.Tree())
}
