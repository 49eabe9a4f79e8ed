package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

// A finished run's lines are written to its session file at once; its
// inbox records are acknowledged only with the session's next fsync (the
// group commit, or Close). The tests here use a window of an hour, so
// that fsync is the one of the stop.

// longWindow makes the session group commit wait an hour.
func longWindow(c *gateway.Config) { c.SessionGroupWindow = time.Hour }

// pendingOnDisk counts the items the inbox file of dir holds.
func pendingOnDisk(t *testing.T, dir string) int {
	t.Helper()
	ib, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	return ib.Len()
}

// answerTwice answers "one" and restarts (the stop makes the session
// durable), then answers "two" and "three" within the group window. It
// returns the session file's size before "two" (all durable) and the
// session fsyncs counted once "two" was answered (files may be nil).
func answerTwice(t *testing.T, h *harness, files *sessiontest.FaultyStorage) (durable int64, syncsAfterTwo int32) {
	t.Helper()
	h.send("one")
	h.waitText(dmConv, "You said: one")
	h.restart()
	if n := h.inbox.Len(); n != 0 {
		t.Fatalf("%d messages in the inbox after a clean restart", n)
	}
	st, err := os.Stat(h.sessions()[0])
	if err != nil {
		t.Fatal(err)
	}
	h.send("two")
	h.waitText(dmConv, "You said: two")
	h.waitFor("the second run's delivery in the file", func() bool { return len(deliveries(h)) == 2 })
	if files != nil {
		syncsAfterTwo = files.Syncs.Load()
	}
	h.send("three")
	h.waitText(dmConv, "You said: three")
	h.waitFor("the third run's delivery in the file", func() bool { return len(deliveries(h)) == 3 })
	time.Sleep(100 * time.Millisecond) // the run's end is over
	return st.Size(), syncsAfterTwo
}

// TestRunsAreAcknowledgedWithTheGroupCommit: two runs within the window
// are in the session file (written) but their messages stay in the inbox,
// and the second one made no fsync of the session; the stop's one fsync
// lets both go, and the restart finds nothing to do.
func TestRunsAreAcknowledgedWithTheGroupCommit(t *testing.T) {
	t.Parallel()
	files := &sessiontest.FaultyStorage{Storage: session.FileStorage{}}
	h := newHarness(t, nil, withConfig(longWindow), withSessionFiles(files))
	_, base := answerTwice(t, h, files)
	if n := h.inbox.Len(); n != 2 {
		t.Fatalf("%d messages in the inbox before the session's fsync, want 2", n)
	}
	if n := files.Syncs.Load() - base; n != 0 {
		t.Fatalf("%d session fsyncs for the third run within the window, want none before the group commit", n)
	}
	h.stop()
	if n := files.Syncs.Load() - base; n != 1 {
		t.Fatalf("%d session fsyncs at the stop, want 1 for both runs", n)
	}
	if n := pendingOnDisk(t, h.dir); n != 0 {
		t.Fatalf("%d messages left in the inbox after the session's fsync, want 0", n)
	}
	calls := h.model.Calls()
	h.start()
	time.Sleep(300 * time.Millisecond)
	if n := h.model.Calls(); n != calls {
		t.Fatalf("the model was asked %d more times after a clean restart", n-calls)
	}
}

// TestProcessCrashAfterTheRunsWriteAnswersNothingAgain: pibot dies after
// two runs' lines were written but before the session's fsync (their
// messages are still in the inbox). The file has the lines (the kernel
// keeps what a dead process wrote), so the replay finds both answers
// delivered: nothing is sent again, nothing asked again.
func TestProcessCrashAfterTheRunsWriteAnswersNothingAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, withConfig(longWindow))
	answerTwice(t, h, nil)
	if n := h.inbox.Len(); n != 2 {
		t.Fatalf("%d messages in the inbox, want 2 (the crash window)", n)
	}
	dir := crashCopy(t, h.dir)

	h2 := newHarness(t, nil, withDir(dir), withConfig(longWindow))
	// (Nothing new to fsync: the opened file is durable, so the replayed
	// messages are acknowledged at once.)
	h2.waitFor("the replayed messages acknowledged", func() bool { return h2.inbox.Len() == 0 })
	time.Sleep(300 * time.Millisecond)
	if n := h2.model.Calls(); n != 0 {
		t.Fatalf("the model was asked %d times after the crash; the answers were in the file", n)
	}
	if msgs := h2.ad.Messages(dmConv); len(msgs) != 0 {
		t.Fatalf("the restart sent %q; the answers were delivered before the crash", msgs)
	}
}

// TestMachineCrashInTheWindowAnswersAgain: the machine dies within the
// window: the runs' lines, never fsynced, are gone from the file, but
// their messages are still in the inbox. Nothing is lost: the restart
// answers them again (the one case where an answer may reach the chat
// twice).
func TestMachineCrashInTheWindowAnswersAgain(t *testing.T) {
	h := newHarness(t, nil, withConfig(longWindow))
	durable, _ := answerTwice(t, h, nil)
	dir := crashCopy(t, h.dir)
	rel, err := filepath.Rel(h.dir, h.sessions()[0])
	if err != nil {
		t.Fatal(err)
	}
	// What was not fsynced is lost (nothing was since the restart).
	if err := os.Truncate(filepath.Join(dir, rel), durable); err != nil {
		t.Fatal(err)
	}

	h2 := newHarness(t, nil, withDir(dir)) // the default window
	h2.waitText(dmConv, "You said: three")
	h2.waitFor("the replayed messages acknowledged", func() bool { return h2.inbox.Len() == 0 })
	got := userTexts(h2.entries(h2.sessions()[0]))
	for _, want := range []string{"one", "two", "three"} {
		n := 0
		for _, u := range got {
			if u == want {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("user message %q is in the session %d times after the replay, want once: %q", want, n, got)
		}
	}
}

// TestFailedSessionFsyncKeepsTheMessagesInTheInbox: the disk fails the
// session's fsync after two runs were written: their messages stay in
// the inbox. The restart (its fsyncs work) finds the runs in the file and
// answers nothing twice.
func TestFailedSessionFsyncKeepsTheMessagesInTheInbox(t *testing.T) {
	t.Parallel()
	files := &sessiontest.FaultyStorage{Storage: session.FileStorage{}}
	h := newHarness(t, nil, withConfig(longWindow), withSessionFiles(files))
	answerTwice(t, h, files)
	files.FailSyncs.Store(1)
	h.stop() // the stop's flush fails
	if n := files.Syncs.Load(); n == 0 {
		t.Fatal("the stop made no session fsync")
	}
	if n := pendingOnDisk(t, h.dir); n != 2 {
		t.Fatalf("%d messages in the inbox after a failed fsync, want 2", n)
	}
	restartAnswersNothing(t, h, h.start, "the replayed messages acknowledged")
}

// TestFailedGroupCommitStrandsTheMessageUntilTheDiskWorks: while pibot
// runs, the session's fsync after a finished run fails (here the flush of
// a /queue command, which must be durable at once): the run's message
// stays in the inbox, the gateway is degraded, and once the disk works
// again the message is taken up: its run is found in the file, delivered,
// so it is acknowledged without being answered again.
func TestFailedGroupCommitStrandsTheMessageUntilTheDiskWorks(t *testing.T) {
	t.Parallel()
	files := &sessiontest.FaultyStorage{Storage: session.FileStorage{}}
	h := newHarness(t, nil, withConfig(longWindow), withSessionFiles(files))
	secondRunEnded(h)
	held := func() bool {
		for _, it := range pendingOf(h) {
			var item struct{ In chat.Inbound }
			if json.Unmarshal(it.Data, &item) == nil && item.In.Text == "two" {
				return true
			}
		}
		return false
	}
	if !held() {
		t.Fatal("the run's message left the inbox before the session's fsync")
	}
	// The gateway's probe of the disk fails too until the directory in
	// the way of its file is removed.
	probe := filepath.Join(h.dir, ".probe")
	if err := os.Mkdir(probe, 0o700); err != nil {
		t.Fatal(err)
	}
	files.FailSyncs.Store(1)
	calls := h.model.Calls()
	h.send("/queue followup") // flushed at once: the fsync fails
	h.waitFor("the gateway degraded", func() bool { return h.g.Health() != nil })
	if files.FailSyncs.Load() != 0 {
		t.Fatal("the session's fsync was not tried")
	}
	time.Sleep(100 * time.Millisecond)
	if !held() {
		t.Fatal("the run's message left the inbox although its session's fsync failed")
	}
	// The disk works again (the next fsync succeeds): a probe finds it
	// writable and the stranded message is taken up.
	if err := os.Remove(probe); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the gateway healthy again", func() bool { return h.g.Health() == nil })
	h.waitFor("the message acknowledged", func() bool { return !held() })
	time.Sleep(300 * time.Millisecond)
	if n := h.model.Calls() - calls; n != 0 {
		t.Fatalf("the model was asked %d more times; the run was in the file", n)
	}
	if n := h.countIn("You said: two"); n != 1 {
		t.Fatalf("the answer is in the chat %d times, want once: %q", n, h.ad.Messages(dmConv))
	}
}

// releaseProbe is a Locker (the in-process one's semantics: leases are
// never lost) that notes, when the lease of a session file is released,
// how many session fsyncs were made by then and whether the inbox still
// held anything.
type releaseProbe struct {
	files   *sessiontest.FaultyStorage
	pending func() int

	mu       sync.Mutex
	released []releaseNote
}

type releaseNote struct {
	syncs   int32
	pending int
}

type probedLease struct {
	rp   *releaseProbe
	key  string
	done chan struct{}
	once sync.Once
}

func (l *probedLease) Fence() int64          { return 1 }
func (l *probedLease) Done() <-chan struct{} { return l.done }
func (l *probedLease) Release(context.Context) error {
	l.once.Do(func() {
		if strings.HasSuffix(l.key, ".jsonl") {
			l.rp.mu.Lock()
			l.rp.released = append(l.rp.released, releaseNote{syncs: l.rp.files.Syncs.Load(), pending: l.rp.pending()})
			l.rp.mu.Unlock()
		}
		close(l.done)
	})
	return nil
}

func (rp *releaseProbe) Acquire(_ context.Context, key string, _ int64) (cluster.Lease, error) {
	return &probedLease{rp: rp, key: key, done: make(chan struct{})}, nil
}

func (rp *releaseProbe) notes() []releaseNote {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return slices.Clone(rp.released)
}

// TestEvictionFlushesAcknowledgesThenReleases: an idle session whose last
// run waits for the group commit is evicted: its close fsyncs the file,
// acknowledges the run's message, and only then gives the session's lease
// back.
func TestEvictionFlushesAcknowledgesThenReleases(t *testing.T) {
	t.Parallel()
	files := &sessiontest.FaultyStorage{Storage: session.FileStorage{}}
	rp := &releaseProbe{files: files}
	var h *harness
	rp.pending = func() int { return h.inbox.Len() }
	h = newHarness(t, nil, withSessionFiles(files), withLocker(rp), withConfig(func(c *gateway.Config) {
		longWindow(c)
		c.IdleEvict = 400 * time.Millisecond
	}))
	h.send("one")
	h.waitText(dmConv, "You said: one")
	h.waitFor("the first eviction", func() bool { return len(rp.notes()) == 1 })
	h.send("two")
	h.waitText(dmConv, "You said: two")
	h.waitFor("the run's delivery in the file", func() bool { return len(deliveries(h)) == 2 })
	before := files.Syncs.Load()
	h.waitFor("the second eviction", func() bool { return len(rp.notes()) == 2 })
	note := rp.notes()[1]
	if note.syncs <= before {
		t.Fatalf("the session's lease was released with %d fsyncs, %d before the eviction: not after its flush", note.syncs, before)
	}
	if note.pending != 0 {
		t.Fatalf("%d messages in the inbox when the lease was released, want the run's acknowledged first", note.pending)
	}
}

// TestLostLeaseLeavesTheFinishedRunsMessageInTheInbox: the session's lease
// is lost after a run ended but before the session's fsync: the message is
// not acknowledged (the session's next holder takes it); the restart that
// holds it finds the run delivered and answers nothing again.
func TestLostLeaseLeavesTheFinishedRunsMessageInTheInbox(t *testing.T) {
	t.Parallel()
	locker := &revocable{}
	h := newHarness(t, nil, withLocker(locker), withConfig(longWindow))
	secondRunEnded(h)
	path := h.sessions()[0]
	locker.revoke(path)
	h.waitFor("the session unloaded", func() bool { return locker.held(path) == 0 })
	time.Sleep(300 * time.Millisecond)
	if n := h.inbox.Len(); n != 1 {
		t.Fatalf("%d messages in the inbox after the lease was lost, want the run's one", n)
	}
	restartAnswersNothing(t, h, h.restart, "the replayed message acknowledged")
}

// restartAnswersNothing starts the gateway again (start or restart) and
// checks that the replayed messages leave the inbox without asking the
// model or writing to the chat again: their runs were in the file.
func restartAnswersNothing(t *testing.T, h *harness, start func(), what string) {
	t.Helper()
	calls, sent := h.model.Calls(), len(h.ad.Messages(dmConv))
	start()
	h.waitFor(what, func() bool { return h.inbox.Len() == 0 })
	time.Sleep(300 * time.Millisecond)
	if n := h.model.Calls() - calls; n != 0 {
		t.Fatalf("the model was asked %d more times; the runs were in the file", n)
	}
	if n := len(h.ad.Messages(dmConv)) - sent; n != 0 {
		t.Fatalf("%d more chat messages after the restart, want none: %q", n, h.ad.Messages(dmConv))
	}
}

// secondRunEnded answers "one", restarts (so "one" is durable and
// acknowledged), answers "two" and returns once that run's end is over:
// its delivery in the file, its acknowledgement waiting for the session's
// next fsync.
func secondRunEnded(h *harness) {
	h.t.Helper()
	h.send("one")
	h.waitText(dmConv, "You said: one")
	h.restart()
	h.send("two")
	h.waitText(dmConv, "You said: two")
	h.waitFor("the run's delivery in the file", func() bool { return len(deliveries(h)) == 2 })
	time.Sleep(100 * time.Millisecond) // the run's end is over
}
