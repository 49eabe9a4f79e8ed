package gateway_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/session"
)

// TestEvictedLongSessionReadsOnlyTheTail: a long conversation's session
// (here 6,000 entries, written by another program while it was evicted)
// is loaded once; when it is evicted again its index stays, and its next
// message reads a few lines of the file, not the file.
func TestEvictedLongSessionReadsOnlyTheTail(t *testing.T) {
	t.Parallel()
	files := &readCounting{closed: make(chan struct{}, 16)}
	h := newHarness(t, nil, withSessionFiles(files), withConfig(func(c *gateway.Config) { c.IdleEvict = 200 * time.Millisecond }))
	h.send("one")
	h.waitText(dmConv, "You said: one")
	files.waitClosed(t)
	path := h.sessions()[0]
	appendForeign(t, path, 6000)

	h.send("two") // loads the whole file once
	h.waitText(dmConv, "You said: two")
	files.waitClosed(t)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	files.read.Store(0)
	h.send("three")
	h.waitText(dmConv, "You said: three")
	if got := files.read.Load(); got > fi.Size()/10 {
		t.Fatalf("the message after the eviction read %d bytes of the %d-byte file", got, fi.Size())
	}
	oneSessionSays(t, h, "one", "two", "three")
}

// TestRestartedGatewayReadsTheSavedIndex: the index of a long
// conversation's session (here 6,000 entries, written by another program
// while no gateway ran), saved when the gateway stops, serves its first
// message after a restart, which reads a few lines of the file, not the
// file.
func TestRestartedGatewayReadsTheSavedIndex(t *testing.T) {
	t.Parallel()
	files := &readCounting{closed: make(chan struct{}, 16)}
	h := newHarness(t, nil, withSessionFiles(files))
	h.send("one")
	h.waitText(dmConv, "You said: one")
	h.stop()
	path := h.sessions()[0]
	appendForeign(t, path, 6000)

	h.start()
	h.send("two") // loads the whole file once; the stop saves its index
	h.waitText(dmConv, "You said: two")
	h.restart()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	files.read.Store(0)
	h.send("three")
	h.waitText(dmConv, "You said: three")
	if got := files.read.Load(); got > fi.Size()/10 {
		t.Fatalf("the first message after the restart read %d bytes of the %d-byte file", got, fi.Size())
	}
	oneSessionSays(t, h, "one", "two", "three")
}

// readCounting is the file system counting the bytes read from session
// files and saying when a session file is closed.
type readCounting struct {
	session.FileStorage
	read   atomic.Int64
	closed chan struct{}
}

func (c *readCounting) ReadFile(path string) ([]byte, error) {
	b, err := c.FileStorage.ReadFile(path)
	c.read.Add(int64(len(b)))
	return b, err
}

func (c *readCounting) OpenRange(path string) (session.RangeFile, error) {
	f, err := c.FileStorage.OpenRange(path)
	if err != nil {
		return nil, err
	}
	return countedRange{f, c}, nil
}

func (c *readCounting) OpenAppend(path string) (session.File, error) {
	f, err := c.FileStorage.OpenAppend(path)
	if err != nil {
		return nil, err
	}
	return closeSignal{f, c.closed}, nil
}

func (c *readCounting) Create(path string, data []byte) (session.File, error) {
	f, err := c.FileStorage.Create(path, data)
	if err != nil {
		return nil, err
	}
	return closeSignal{f, c.closed}, nil
}

// waitClosed waits until a session file was closed (the idle session's
// eviction).
func (c *readCounting) waitClosed(t *testing.T) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle session was not evicted")
	}
}

type countedRange struct {
	session.RangeFile
	c *readCounting
}

// FileID passes the file's identity on, for the saved indexes.
func (r countedRange) FileID() (dev, ino uint64, ok bool) {
	if fi, is := r.RangeFile.(session.FileIdentifier); is {
		return fi.FileID()
	}
	return 0, 0, false
}

func (r countedRange) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.RangeFile.ReadAt(p, off)
	r.c.read.Add(int64(n))
	return n, err
}

type closeSignal struct {
	session.File
	closed chan struct{}
}

func (f closeSignal) Close() error {
	err := f.File.Close()
	select {
	case f.closed <- struct{}{}:
	default:
	}
	return err
}

// appendForeign appends n entries another program writes to the session
// file at path: roots of no location, so the conversation's branch is
// unchanged and only the file grows.
func appendForeign(t *testing.T, path string, n int) {
	t.Helper()
	w, err := session.OpenFile(path, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		if _, err := w.Append(session.Entry{Type: session.TypeCustom, CustomType: "other.program", Data: []byte(`{"n":1}`)}, session.SyncGrouped); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
