package session_test

import (
	"strings"
	"sync"
	"testing"
	"time"

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
				leaf := s.Tree().Leaf()
				if _, err := s.Tree().Context(leaf); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					_ = s.Tree()
				}
				_ = s.Tree().Heads()
				_, _ = s.Tree().Get(leaf)
				_ = s.Tree().Children(leaf)
			}
		}()
	}
	parent := s.Tree().Leaf()
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
	c, err := s.Tree().Context("")
	if err != nil || len(c.Messages) != n || s.Tree().Heads()["l"] != parent {
		t.Fatalf("messages %d head %s: %v", len(c.Messages), s.Tree().Heads()["l"], err)
	}
}

// slowSyncStorage is a MemStorage whose files block in Sync until release
// is closed, like a disk busy with other fsyncs.
type slowSyncStorage struct {
	*session.MemStorage
	syncing chan struct{} // receives once per Sync call
	release chan struct{}
}

func (s slowSyncStorage) OpenAppend(path string) (session.File, error) {
	f, err := s.MemStorage.OpenAppend(path)
	return slowSyncFile{File: f, st: s}, err
}

// Create is MemStorage.Create; the new file counts as synced.
func (s slowSyncStorage) Create(path string, data []byte) (session.File, error) {
	f, err := s.MemStorage.Create(path, data)
	return slowSyncFile{File: f, st: s}, err
}

type slowSyncFile struct {
	session.File
	st slowSyncStorage
}

func (f slowSyncFile) Sync() error {
	f.st.syncing <- struct{}{}
	<-f.st.release
	return f.File.Sync()
}

// TestAppendDoesNotWaitForSync: a grouped append goes on while a Flush is
// waiting for the disk; that Flush covers what was appended before it, the
// next one the rest.
func TestAppendDoesNotWaitForSync(t *testing.T) {
	st := slowSyncStorage{MemStorage: session.NewMemStorage(), syncing: make(chan struct{}, 8), release: make(chan struct{})}
	s, err := session.Create(st, "/c", session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"}, session.Options{DeferCreate: true, GroupWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := llm.UserText("first", 1)
	first, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, session.SyncGrouped)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil { // creates the file
		t.Fatal(err)
	}
	m1 := llm.UserText("more", 1)
	first, err = s.Append(session.Entry{Type: session.TypeMessage, Message: &m1, ParentID: first.ID}, session.SyncGrouped)
	if err != nil {
		t.Fatal(err)
	}
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush() }()
	<-st.syncing // the Flush waits in Sync
	m2 := llm.UserText("second", 2)
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m2, ParentID: first.ID}, session.SyncGrouped)
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a grouped append waited for an fsync in flight")
	}
	close(st.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	lines := func() int {
		b, err := st.ReadFile(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "\n")
	}
	// The append made during the sync waits for the next flush.
	if n := lines(); n != 4 {
		t.Fatalf("file has %d lines after the first flushes, want 4 (header, model, two messages)", n)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := lines(); n != 5 {
		t.Fatalf("file has %d lines, want 5 (header, model, three messages)", n)
	}
}
