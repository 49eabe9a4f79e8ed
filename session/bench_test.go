package session_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

func benchOpenContext(b *testing.B, n int) {
	var buf bytes.Buffer
	if err := sessiontest.Generate(&buf, n, 1); err != nil {
		b.Fatal(err)
	}
	st := session.NewMemStorage()
	_ = st.MkdirAll("/b")
	if err := st.WriteFile("/b/s.jsonl", buf.Bytes()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		s, err := session.Open(st, "/b/s.jsonl", session.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Tree().Context(""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenContext1k(b *testing.B)  { benchOpenContext(b, 1000) }
func BenchmarkOpenContext10k(b *testing.B) { benchOpenContext(b, 10000) }

func BenchmarkAppendGrouped(b *testing.B) {
	s, err := session.CreateFile(filepath.Join(b.TempDir(), "s"), session.Header{}, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "off"}, session.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := llm.UserText("a benchmark message of moderate length, like a chat line", 1)
	parent := s.Tree().Leaf()
	b.ReportAllocs()
	for b.Loop() {
		e, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: parent}, session.SyncGrouped)
		if err != nil {
			b.Fatal(err)
		}
		parent = e.ID
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
}

// benchWriteContext times WriteContext on a generated file (in the page
// cache) and reports the split of the last run: read, index, validate
// and emit, in milliseconds.
func benchWriteContext(b *testing.B, n int) {
	var buf bytes.Buffer
	if err := sessiontest.Generate(&buf, n, 1); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	var st session.ContextStats
	for b.Loop() {
		if _, err := session.WriteContext(io.Discard, p, "", &st); err != nil {
			b.Fatal(err)
		}
		if !st.Fast {
			b.Fatalf("fell back: %s", st.Fallback)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(st.Read), "read-ms")
	b.ReportMetric(ms(st.Index), "index-ms")
	b.ReportMetric(ms(st.Validate), "validate-ms")
	b.ReportMetric(ms(st.Emit), "emit-ms")
}

func BenchmarkWriteContext10k(b *testing.B)  { benchWriteContext(b, 10000) }
func BenchmarkWriteContext100k(b *testing.B) { benchWriteContext(b, 100000) }

// BenchmarkKeptIndex is what an Indexes keeps of an evicted session of
// 100,000 entries (a compaction every 1,000; sessiontest.GenerateWith):
// kept-B/entry, the live heap it holds per entry once the session is
// closed; saved-B/entry, the size of its saved index per entry
// (NewSavedIndexes). Each op opens the file lazily (through the saved
// index from the second op on) and closes it.
func BenchmarkKeptIndex(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "s.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := sessiontest.GenerateWith(f, n, 2, sessiontest.GenOptions{CompactEvery: 1000}); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	// The generator draws ids that make a parent loop now and then: a
	// writable open rewrites it, so that the file loads lazily.
	s, err := session.OpenFile(path, session.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	var kept float64
	b.ReportAllocs()
	for b.Loop() {
		idx := session.NewSavedIndexes(dir, 1, 1<<30)
		heap0 := liveHeap()
		s, err := session.OpenFile(path, session.Options{Lazy: true, Indexes: idx, ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		entries := s.Tree().Len()
		if !session.IsLazy(s.Tree()) {
			b.Fatalf("not loaded lazily: %+v", s.Report())
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		s = nil
		kept += (float64(liveHeap()) - float64(heap0)) / float64(entries)
		if k, _ := idx.Len(); k != 1 {
			b.Fatalf("%d indexes kept", k)
		}
	}
	b.ReportMetric(kept/float64(b.N), "kept-B/entry")
	saved, err := filepath.Glob(filepath.Join(dir, "*.idx"))
	if err != nil || len(saved) != 1 {
		b.Fatalf("saved indexes: %v %v", saved, err)
	}
	fi, err := os.Stat(saved[0])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/n, "saved-B/entry")
}

// liveHeap is the bytes of live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
