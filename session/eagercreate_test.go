package session_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/session"
)

// TestEagerCreateCreatesTheFileWithoutAFlush: with DeferCreate and
// EagerCreate, Create does no I/O itself, but the file (header and first
// entry) is created at once in the background, not a group window later
// nor by the caller's first Write or Flush; BeforeCreate still runs first.
func TestEagerCreateCreatesTheFileWithoutAFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := session.NewMemStorage()
		hooked := false
		s, err := session.Create(st, "/d", session.Header{ID: "x", Timestamp: "t"}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"},
			session.Options{DeferCreate: true, EagerCreate: true, GroupWindow: time.Hour, BeforeCreate: func() error { hooked = true; return nil }})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		synctest.Wait() // the background creation has run; an hour has not passed
		data, err := st.ReadFile(s.Path())
		if err != nil {
			t.Fatalf("no file without a flush: %v", err)
		}
		if !hooked {
			t.Fatal("the file was created without BeforeCreate")
		}
		check, err := session.Open(st, s.Path(), session.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("the created file (%q) does not open: %v", data, err)
		}
		defer check.Close()
		if n := len(check.Tree().Entries()); n != 1 {
			t.Fatalf("%d entries in the created file, want the first one", n)
		}
	})
}
