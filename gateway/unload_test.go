package gateway_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/session"
)

// TestMessageDuringAnUnloadKeepsItsSession: a message arrives while its
// session's owner is being unloaded (evicted as idle here; a full disk
// unloads a failed owner the same way) and the close has not released
// the session's lease yet. The message waits for the close and goes on in
// the same session file. Before, taking the lease failed, and a second
// session file was started: the conversation lost its history.
func TestMessageDuringAnUnloadKeepsItsSession(t *testing.T) {
	t.Parallel()
	files := newSlowClose()
	h := answerThenEvict(t, files)
	h.send("two")
	// Long enough for the message to start a second session meanwhile,
	// as it did.
	time.Sleep(300 * time.Millisecond)
	close(files.release)
	h.waitText(dmConv, "You said: two")
	oneSessionSays(t, h, "one", "two")
}

// TestUnreadableSessionIsNotReplaced: a conversation's session file
// cannot be read when its next message comes (an I/O error; the session
// was unloaded as idle). The sender is told, the message stays in the
// inbox, and no second session file is started; after a restart the
// message is answered in the conversation's file. Before, the message
// started a new session file, and the conversation lost its history.
func TestUnreadableSessionIsNotReplaced(t *testing.T) {
	t.Parallel()
	files := newSlowClose()
	close(files.release)
	h := answerThenEvict(t, files)
	files.failReads.Store(1)
	h.send("two")
	h.waitFor("the sender told", func() bool { return h.countIn("could not open this conversation") == 1 })
	if s := h.sessions(); len(s) != 1 {
		t.Fatalf("%d session files after the failed read, want 1: %q", len(s), s)
	}
	if n := h.inbox.Len(); n != 1 {
		t.Fatalf("%d messages in the inbox, want the one not taken", n)
	}
	h.restart()
	h.waitText(dmConv, "You said: two")
	oneSessionSays(t, h, "one", "two")
}

// answerThenEvict runs a gateway whose idle sessions are evicted after
// 200 ms on files, answers "one", and returns once the session's
// eviction closes its file (files.closing).
func answerThenEvict(t *testing.T, files *slowClose) *harness {
	t.Helper()
	h := newHarness(t, nil, withSessionFiles(files), withConfig(func(c *gateway.Config) { c.IdleEvict = 200 * time.Millisecond }))
	h.send("one")
	h.waitText(dmConv, "You said: one")
	select {
	case <-files.closing:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle session was not evicted")
	}
	return h
}

// oneSessionSays waits until the runs of the user messages want are
// delivered, and checks that they are all in one session file.
func oneSessionSays(t *testing.T, h *harness, want ...string) {
	t.Helper()
	h.waitFor("the runs' deliveries in the file", func() bool { return len(deliveries(h)) == len(want) })
	s := h.sessions()
	if len(s) != 1 {
		t.Fatalf("%d session files, want 1: %q", len(s), s)
	}
	if got := userTexts(h.entries(s[0])); !slices.Equal(got, want) {
		t.Fatalf("user messages of the session: %q, want %q", got, want)
	}
}

// newSlowClose returns session storage on the file system whose first
// file Close (the eviction's) waits for release.
func newSlowClose() *slowClose {
	s := &slowClose{Storage: session.FileStorage{}, closing: make(chan struct{}, 1), release: make(chan struct{})}
	s.armed.Store(true)
	return s
}

// slowClose is session storage whose files' Close, once armed, says it
// was called (closing) and waits for release, and whose next failReads
// reads fail.
type slowClose struct {
	session.Storage
	armed     atomic.Bool
	closing   chan struct{}
	release   chan struct{}
	failReads atomic.Int32
}

func (s *slowClose) ReadFile(path string) ([]byte, error) {
	if s.failReads.Add(-1) >= 0 {
		return nil, fmt.Errorf("read %s: %w", path, syscall.EIO)
	}
	return s.Storage.ReadFile(path)
}

func (s *slowClose) OpenAppend(path string) (session.File, error) {
	f, err := s.Storage.OpenAppend(path)
	if err != nil {
		return nil, err
	}
	return slowFile{f, s}, nil
}

func (s *slowClose) Create(path string, data []byte) (session.File, error) {
	f, err := s.Storage.Create(path, data)
	if err != nil {
		return nil, err
	}
	return slowFile{f, s}, nil
}

type slowFile struct {
	session.File
	s *slowClose
}

func (f slowFile) Close() error {
	if f.s.armed.CompareAndSwap(true, false) {
		f.s.closing <- struct{}{}
		<-f.s.release
	}
	return f.File.Close()
}
