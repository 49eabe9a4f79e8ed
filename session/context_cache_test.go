package session

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pibot/pibot/llm"
)

// leafMessages is the decoded context of s's default leaf.
func leafMessages(t *testing.T, s *Session) []llm.Message {
	t.Helper()
	c, err := s.Tree().Context("")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.LLMMessages()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestLLMMessagesDecodeOnceCopiesOut: the second call serves stored
// messages from the Session's cache, and what a caller changes in one
// result never shows in the next.
func TestLLMMessagesDecodeOnceCopiesOut(t *testing.T) {
	s, err := Create(NewMemStorage(), "/c", Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u := llm.UserText("question", 1)
	e, err := s.Append(Entry{Type: TypeMessage, Message: &u, ParentID: s.Tree().Leaf()}, SyncAlways)
	if err != nil {
		t.Fatal(err)
	}
	a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("answer")}, Provider: "p", Model: "m", StopReason: llm.StopStop, Timestamp: 2}
	if _, err := s.Append(Entry{Type: TypeMessage, Message: &a, ParentID: e.ID}, SyncAlways); err != nil {
		t.Fatal(err)
	}
	first := leafMessages(t, s)
	first[1].Content[0].Text = "changed by the caller"
	first[1].Content = append(first[1].Content, llm.TextBlock("more"))
	second := leafMessages(t, s)
	if len(second) != 2 || second[0].Text() != "question" || second[1].Text() != "answer" || len(second[1].Content) != 1 {
		t.Fatalf("second context = %+v", second)
	}
}

// TestAppendedMessagesMatchDecoded: Append seeds the decode cache with the
// message as appended; that must equal what a later process decodes from
// the file, for every message pi wrote in the vectors.
func TestAppendedMessagesMatchDecoded(t *testing.T) {
	dir, m := loadVectors(t)
	for _, v := range m.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			src, err := OpenFile(filepath.Join(dir, v.Name+".jsonl"), Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			msgs := leafMessages(t, src)
			st := NewMemStorage()
			s, err := Create(st, "/v", Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, msg := range msgs {
				switch msg.Role {
				case llm.RoleUser, llm.RoleAssistant, llm.RoleToolResult, llm.RoleBashExecution:
				default:
					continue // derived from other entries, not stored as messages
				}
				if _, err := s.Append(Entry{Type: TypeMessage, Message: &msg, ParentID: s.Tree().Leaf()}, SyncGrouped); err != nil {
					t.Fatal(err)
				}
				n++
			}
			seeded := leafMessages(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Open(st, s.Path(), Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			decoded := leafMessages(t, r)
			if len(seeded) != n || len(decoded) != n {
				t.Fatalf("%d messages appended, %d served, %d decoded", n, len(seeded), len(decoded))
			}
			for i := range seeded {
				if !reflect.DeepEqual(seeded[i], decoded[i]) {
					t.Errorf("message %d (%s): as appended %+v\nas decoded %+v", i, seeded[i].Role, seeded[i], decoded[i])
				}
			}
		})
	}
}
