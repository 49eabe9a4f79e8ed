package session

import (
	"testing"

	"github.com/pibot/pibot/llm"
)

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
	e, err := s.Append(Entry{Type: TypeMessage, Message: &u, ParentID: s.Leaf()}, SyncAlways)
	if err != nil {
		t.Fatal(err)
	}
	a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("answer")}, Provider: "p", Model: "m", StopReason: llm.StopStop, Timestamp: 2}
	if _, err := s.Append(Entry{Type: TypeMessage, Message: &a, ParentID: e.ID}, SyncAlways); err != nil {
		t.Fatal(err)
	}
	get := func() []llm.Message {
		t.Helper()
		c, err := s.Context("")
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := c.LLMMessages()
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	first := get()
	first[1].Content[0].Text = "changed by the caller"
	first[1].Content = append(first[1].Content, llm.TextBlock("more"))
	second := get()
	if len(second) != 2 || second[0].Text() != "question" || second[1].Text() != "answer" || len(second[1].Content) != 1 {
		t.Fatalf("second context = %+v", second)
	}
}
