package session_test

import (
	"bytes"
	"path/filepath"
	"testing"

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
		if _, err := s.Context(""); err != nil {
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
	parent := s.Leaf()
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
