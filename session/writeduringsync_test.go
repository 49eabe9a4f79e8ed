package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// stallStorage is a MemStorage whose files' Sync waits for release once
// armed (a slow fdatasync).
type stallStorage struct {
	*session.MemStorage
	armed   chan struct{} // closed: the next Syncs stall
	syncing chan struct{} // a Sync is stalled
	release chan struct{}
}

func (s *stallStorage) Create(path string, data []byte) (session.File, error) {
	f, err := s.MemStorage.Create(path, data)
	if err != nil {
		return nil, err
	}
	return stallFile{File: f, st: s}, nil
}

type stallFile struct {
	session.File
	st *stallStorage
}

func (f stallFile) Sync() error {
	select {
	case <-f.st.armed:
		f.st.syncing <- struct{}{}
		<-f.st.release
	default:
	}
	return f.File.Sync()
}

// TestWriteDoesNotWaitForAFlushsFsync: Session.Write puts the lines into
// the file while a flush waits for the disk (the gateway's reply journal
// writes on the reply's stream, and the group commit fsyncs the same
// session every window); the flush's fsync still makes what it wrote
// durable, and the next one the rest.
func TestWriteDoesNotWaitForAFlushsFsync(t *testing.T) {
	st := &stallStorage{MemStorage: session.NewMemStorage(), armed: make(chan struct{}), syncing: make(chan struct{}, 1), release: make(chan struct{})}
	s, err := session.Create(st, "/d", session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"}, session.Options{GroupWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	add := func(text string) {
		m := llm.UserText(text, 1)
		if _, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, session.SyncGrouped); err != nil {
			t.Fatal(err)
		}
	}
	add("first")
	close(st.armed)
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush() }()
	<-st.syncing // the flush waits for the disk
	add("second")
	written := make(chan error, 1)
	go func() { written <- s.Write() }()
	deadline := time.After(15 * time.Second)
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatal("Write waited for the flush's fsync")
	}
	data, err := st.ReadFile(s.Path())
	if err != nil || !strings.Contains(string(data), "second") {
		t.Fatalf("the written line is not in the file while the flush waits: %v", err)
	}
	close(st.release)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	durable := make(chan error, 1)
	s.OnDurable(func(err error) { durable <- err })
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := <-durable; err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
