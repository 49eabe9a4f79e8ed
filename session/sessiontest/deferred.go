package sessiontest

import (
	"errors"
	"io/fs"
	"testing"
	"time"

	"github.com/pibot/pibot/session"
)

// deferred creates a session with Options.DeferCreate and checks that no
// file exists yet.
func deferred(t *testing.T, st session.Storage, dir string, opts session.Options) *session.Session {
	t.Helper()
	opts.DeferCreate = true
	s := create(t, st, dir, opts)
	if _, err := st.ReadFile(s.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deferred create: file read err %v, want not-exist", err)
	}
	return s
}

// checkFile reopens path and checks that it holds want entries ending at leaf.
func checkFile(t *testing.T, st session.Storage, path string, want int, leaf string) {
	t.Helper()
	r, err := session.Open(st, path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Tree().Len() != want || r.Tree().Leaf() != leaf || !r.Report().Clean() {
		t.Fatalf("reopened: len %d leaf %s report %+v; want len %d leaf %s", r.Tree().Len(), r.Tree().Leaf(), r.Report(), want, leaf)
	}
}

func testDeferredFlush(t *testing.T, st session.Storage, dir string) {
	s := deferred(t, st, dir, session.Options{GroupWindow: time.Hour})
	u, err := s.Append(session.Entry{Type: session.TypeMessage, Message: user("hi").Message, ParentID: s.Tree().Leaf()}, session.SyncGrouped)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReadFile(s.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("grouped append created the file early: %v", err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, st, s.Path(), 2, u.ID)
	// After the file exists, appends go straight to it.
	a := appendE(t, s, assistant("hello"), u.ID)
	checkFile(t, st, s.Path(), 3, a.ID)
}

func testDeferredClose(t *testing.T, st session.Storage, dir string) {
	s := deferred(t, st, dir, session.Options{GroupWindow: time.Hour})
	u, err := s.Append(session.Entry{Type: session.TypeMessage, Message: user("hi").Message, ParentID: s.Tree().Leaf()}, session.SyncGrouped)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, st, s.Path(), 2, u.ID)
}

func testDeferredGroup(t *testing.T, st session.Storage, dir string) {
	s := deferred(t, st, dir, session.Options{GroupWindow: 10 * time.Millisecond})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := st.ReadFile(s.Path()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the group commit never created the deferred file")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The file exists from the create on and is empty until the create's
	// one write: wait for the group commit that creates it to finish
	// (Flush takes its turn after it, and has nothing left to do).
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, st, s.Path(), 1, s.Tree().Leaf())
}

// testDeferredCollision: a file that appeared at the path in the meantime
// is never overwritten; the writer is fenced.
func testDeferredCollision(t *testing.T, st session.Storage, dir string) {
	s := deferred(t, st, dir, session.Options{GroupWindow: time.Hour})
	if err := st.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteFile(s.Path(), []byte("not mine\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); !errors.Is(err, session.ErrFenced) {
		t.Fatalf("flush over an existing file: %v, want fenced", err)
	}
	if _, err := s.Append(user("x"), session.SyncGrouped); !errors.Is(err, session.ErrFenced) {
		t.Fatalf("append after a failed create: %v, want fenced", err)
	}
	if b, _ := st.ReadFile(s.Path()); string(b) != "not mine\n" {
		t.Fatalf("existing file changed to %q", b)
	}
}
