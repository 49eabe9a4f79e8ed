package session

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

// TestBranchBack walks a reopened file's branch from the leaf: the
// entries of Branch in reverse, messages as envelopes (not decoded, Raw
// and pibot fields set), other entries whole; an unknown leaf yields
// nothing, and a walk stops when told.
func TestBranchBack(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := CreateFile(t.TempDir(), Header{ID: NewSessionID(now), Timestamp: Timestamp(now)},
		Entry{Type: TypeModelChange, Provider: "f", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	add := func(e Entry) string {
		t.Helper()
		e.ParentID = s.Tree().Leaf()
		out, err := s.Append(e, SyncAlways)
		if err != nil {
			t.Fatal(err)
		}
		return out.ID
	}
	u := llm.UserText("question", 1)
	add(Entry{Type: TypeMessage, Message: &u, Pibot: &Meta{Loc: "term:local", Msg: "term:local#1"}})
	add(Entry{Type: TypeCustom, CustomType: "pibot.queue", Data: json.RawMessage(`{"mode":"collect"}`)})
	a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("answer")}, StopReason: llm.StopStop}
	leaf := add(Entry{Type: TypeMessage, Message: &a})
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenFile(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	var got []Entry
	for e := range s.Tree().BranchBack(leaf) {
		got = append(got, e)
	}
	// Branch decodes every message; read after the walk, so that the walk
	// found none decoded.
	want, err := s.Tree().Branch(leaf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("walked %d entries, the branch has %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[len(want)-1-i]
		if g.Type != w.Type || g.ID != w.ID || g.ParentID != w.ParentID || g.Timestamp != w.Timestamp || !bytes.Equal(g.Raw, w.Raw) {
			t.Errorf("entry %d: got %s %s (parent %s), want %s %s (parent %s)", i, g.Type, g.ID, g.ParentID, w.Type, w.ID, w.ParentID)
		}
		if (g.Pibot == nil) != (w.Pibot == nil) || g.Pibot != nil && *g.Pibot != *w.Pibot {
			t.Errorf("entry %d: pibot %+v, want %+v", i, g.Pibot, w.Pibot)
		}
		switch {
		case g.Type == TypeMessage && g.Message != nil:
			t.Errorf("entry %d: message decoded", i)
		case g.Type == TypeCustom && (g.CustomType != w.CustomType || !bytes.Equal(g.Data, w.Data)):
			t.Errorf("entry %d: custom %s %s, want %s %s", i, g.CustomType, g.Data, w.CustomType, w.Data)
		case g.Type == TypeModelChange && g.ModelID != w.ModelID:
			t.Errorf("entry %d: model %q, want %q", i, g.ModelID, w.ModelID)
		}
	}

	n := 0
	for range s.Tree().BranchBack(leaf) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("a walk told to stop yielded %d entries", n)
	}
	for e := range s.Tree().BranchBack("nosuchid") {
		t.Errorf("unknown leaf yielded %s", e.ID)
	}
}
