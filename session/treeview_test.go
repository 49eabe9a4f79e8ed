package session

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

// TestTreeTextTurns draws a session with a branch: by default one line per
// user turn, heads marked on their turn, pibot bookkeeping hidden; with
// All every entry but the bookkeeping.
func TestTreeTextTurns(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := CreateFile(t.TempDir(), Header{ID: NewSessionID(now), Timestamp: Timestamp(now)},
		Entry{Type: TypeModelChange, Provider: "f", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add := func(parent string, m llm.Message, loc string) string {
		t.Helper()
		e := Entry{Type: TypeMessage, ParentID: parent, Message: &m}
		if loc != "" {
			e.Pibot = &Meta{Loc: loc}
		}
		e, err := s.Append(e, SyncAlways)
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	root := s.Tree().Leaf()
	u1 := add(root, llm.UserText("first question", 1), "term:local")
	a1 := add(u1, llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{{Type: "text", Text: "first answer"}}}, "term:local")
	u2 := add(a1, llm.UserText("second question", 2), "term:local")
	a2 := add(u2, llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{{Type: "text", Text: "second answer"}}}, "term:local")
	alt := add(a1, llm.UserText("another way", 3), "web:thread")
	if err := s.MoveHead("web:thread", alt, SyncAlways); err != nil {
		t.Fatal(err)
	}

	var b bytes.Buffer
	if err := TreeText(&b, s.Tree(), TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	want := u1 + " user: first question\n" +
		"├─ " + u2 + " user: second question  ◀ term:local\n" +
		"└─ " + alt + " user: another way  ◀ web:thread ◀ leaf\n"
	if b.String() != want {
		t.Errorf("turns:\n%s\nwant:\n%s", b.String(), want)
	}
	_ = a2

	b.Reset()
	if err := TreeText(&b, s.Tree(), TreeOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	all := b.String()
	if strings.Contains(all, "pibot.head") || !strings.Contains(all, "assistant: second answer  ◀ term:local") ||
		!strings.Contains(all, "model: f/m") || strings.Count(all, "\n") != s.Tree().Len()-1 {
		t.Errorf("all:\n%s", all)
	}
}

// TestTreeTextForkAtTheTop: two first user messages under a hidden root
// are drawn as siblings.
func TestTreeTextForkAtTheTop(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := CreateFile(t.TempDir(), Header{ID: NewSessionID(now), Timestamp: Timestamp(now)},
		Entry{Type: TypeModelChange, Provider: "f", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	root := s.Tree().Leaf()
	var ids []string
	for i, text := range []string{"one way", "other way"} {
		m := llm.UserText(text, int64(i))
		e, err := s.Append(Entry{Type: TypeMessage, ParentID: root, Message: &m}, SyncAlways)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	var b bytes.Buffer
	if err := TreeText(&b, s.Tree(), TreeOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "├─ " + ids[0] + " user: one way\n└─ " + ids[1] + " user: other way  ◀ leaf\n"
	if b.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
}
