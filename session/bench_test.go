package session_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
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
