package session_test

import (
	"sync"
	"testing"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

func TestConcurrentReadersOneWriter(t *testing.T) {
	s, err := session.Create(session.NewMemStorage(), "/c", session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 300
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				leaf := s.Leaf()
				if _, err := s.Context(leaf); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					_ = s.Tree()
				}
				_ = s.Heads()
				_, _ = s.Get(leaf)
				_ = s.Children(leaf)
			}
		}()
	}
	parent := s.Leaf()
	for i := range n {
		m := llm.UserText("x", int64(i))
		e, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: parent, Pibot: &session.Meta{Loc: "l"}}, session.SyncGrouped)
		if err != nil {
			t.Fatal(err)
		}
		parent = e.ID
	}
	close(done)
	wg.Wait()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	c, err := s.Context("")
	if err != nil || len(c.Messages) != n || s.Heads()["l"] != parent {
		t.Fatalf("messages %d head %s: %v", len(c.Messages), s.Heads()["l"], err)
	}
}
