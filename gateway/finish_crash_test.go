package gateway_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// The tests here stop a gateway at one exact point of a run's end, copy
// its data directory there (what a kill -9 leaves: what write(2) put in
// the files) and start a new gateway on the copy with the same chat.

// trap holds the goroutine that reaches it until released, once, and
// reports that it was reached.
type trap struct {
	once    sync.Once
	caught  chan struct{}
	release chan struct{}
}

func newTrap(t *testing.T) *trap {
	tr := &trap{caught: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(func() { tr.open() })
	return tr
}

// hold blocks the first caller until open.
func (tr *trap) hold() {
	tr.once.Do(func() {
		close(tr.caught)
		<-tr.release
	})
}

func (tr *trap) open() {
	select {
	case <-tr.release:
	default:
		close(tr.release)
	}
}

// wait waits until the trap holds a goroutine.
func (tr *trap) wait(t *testing.T, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	select {
	case <-tr.caught:
	case <-ctx.Done():
		t.Fatalf("the gateway never reached %s", what)
	}
}

// deliveryTrap is session storage whose files hold the write carrying the
// first pibot.delivery record: the gateway stops after the platform
// confirmed the reply, before its end write.
type deliveryTrap struct {
	session.Storage
	tr *trap
}

func (s deliveryTrap) OpenAppend(path string) (session.File, error) {
	f, err := s.Storage.OpenAppend(path)
	if err != nil {
		return nil, err
	}
	return trappedFile{File: f, tr: s.tr}, nil
}

func (s deliveryTrap) Create(path string, data []byte) (session.File, error) {
	if bytes.Contains(data, []byte(`"pibot.delivery"`)) {
		s.tr.hold()
	}
	f, err := s.Storage.Create(path, data)
	if err != nil {
		return nil, err
	}
	return trappedFile{File: f, tr: s.tr}, nil
}

type trappedFile struct {
	session.File
	tr *trap
}

func (f trappedFile) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"pibot.delivery"`)) {
		f.tr.hold()
	}
	return f.File.Write(p)
}

// sendTrap is a chat adapter whose posts of a text containing sub never
// reach the platform: the first one holds until released; all fail.
type sendTrap struct {
	*chattest.Adapter
	sub string
	tr  *trap
}

func (a sendTrap) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	if strings.Contains(m.Markdown, a.sub) {
		a.tr.hold()
		return chat.MsgRef{}, context.Canceled
	}
	return a.Adapter.Send(ctx, conv, m)
}

// withChat makes the harness use ad (the chat of a crashed gateway).
func withChat(ad *chattest.Adapter) option { return func(h *harness) { h.ad = ad } }

// crashAndRestart stops h's gateway where the trap holds it, copies its
// data directory there, lets the crashed gateway go (it writes only to
// its own directory, and makes no chat call that posts) and starts a new
// gateway on the copy with the same chat and a model that must not be
// asked. It returns the new harness and how many chat calls there were
// before it started.
func crashAndRestart(t *testing.T, h *harness, tr *trap, opts ...option) (*harness, int) {
	t.Helper()
	dir := crashCopy(t, h.dir)
	tr.open()
	h.stop()
	calls := len(h.ad.Calls())
	opts = append([]option{withDir(dir), withChat(h.ad)}, opts...)
	return newHarness(t, []faux.Turn{faux.Text("ASKED AGAIN")}, opts...), calls
}

// checkAnsweredOnce checks, once h2 has recorded the delivery and emptied
// its inbox, that the chat shows answer once, in the messages want (the
// reply's messages as the crashed gateway posted them), that nothing was
// posted again and the model not asked again.
func checkAnsweredOnce(t *testing.T, h2 *harness, before int, answer string, want int) {
	t.Helper()
	h2.waitFor("the delivery recorded", func() bool { return len(deliveries(h2)) == 1 })
	h2.waitFor("the inbox to empty", func() bool { return h2.inbox.Len() == 0 })
	if n := h2.model.Calls(); n != 0 {
		t.Errorf("the model was asked %d times after the crash; its answer was stored", n)
	}
	for _, c := range h2.ad.Calls()[before:] {
		if c.Method == chattest.MethodSend && c.Err == nil {
			t.Errorf("the restart posted %q", c.Text)
		}
	}
	msgs := h2.ad.Messages(dmConv)
	if len(msgs) != want {
		t.Fatalf("%d messages in the chat, want %d: %q", len(msgs), want, msgs)
	}
	joined := strings.Join(msgs, " ")
	if strings.Contains(joined, "interrupted") || strings.Contains(joined, "ASKED AGAIN") {
		t.Fatalf("chat %q: the answer is marked or given again", msgs)
	}
	if n := strings.Count(joined, "END"); n != 1 {
		t.Fatalf("the end of the answer is in the chat %d times: %q", n, msgs)
	}
	if got := strings.Join(strings.Fields(joined), " "); got != strings.Join(strings.Fields(answer), " ") {
		t.Fatalf("the chat shows %q, want the answer %q", got, answer)
	}
}

// TestCrashAfterTheFinalEditFinishesThatReply: pibot dies after the
// platform confirmed the reply's final edit, before the run's end write.
// The restart finds the answer in the session and the reply's journaled
// message, edits that message to the answer and records the delivery: the
// user sees one answer and the model is not asked again. (Before, the
// answer waited in memory for the end write: the restart marked the reply
// interrupted and asked the model again, answering twice.)
func TestCrashAfterTheFinalEditFinishesThatReply(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("word ", 40) + "END"
	tr := newTrap(t)
	h := newHarness(t, []faux.Turn{faux.Text(answer).WithDelay(5 * time.Millisecond)}, withSessionFiles(deliveryTrap{session.FileStorage{}, tr}))
	h.send("the question")
	tr.wait(t, "its end write")
	h2, before := crashAndRestart(t, h, tr)
	checkAnsweredOnce(t, h2, before, answer, 1)
	// A further restart changes nothing.
	calls := len(h2.ad.Calls())
	h2.restart()
	h2.waitFor("the inbox to empty", func() bool { return h2.inbox.Len() == 0 })
	for _, c := range h2.ad.Calls()[calls:] {
		if c.Method == chattest.MethodSend || c.Method == chattest.MethodEdit {
			t.Fatalf("a restart after recovery changed the chat: %+v", c)
		}
	}
}

// TestCrashAfterASplitReplyFinishesIt: the same crash, for an answer that
// takes several chat messages (some posted while it streamed, the rest by
// the final delivery). Every message is journaled as the platform posts
// it, so the restart edits them all and posts none again.
func TestCrashAfterASplitReplyFinishesIt(t *testing.T) {
	t.Parallel()
	var words []string
	for i := range 120 {
		words = append(words, "w"+strings.Repeat("x", i%7))
	}
	answer := strings.Join(words, " ") + " END"
	tr := newTrap(t)
	small := func(c *chat.Caps) { c.MaxLen = 200 }
	h := newHarness(t, []faux.Turn{faux.Text(answer).WithDelay(2 * time.Millisecond)}, withCaps(small), withSessionFiles(deliveryTrap{session.FileStorage{}, tr}))
	h.send("the question")
	tr.wait(t, "its end write")
	posted := len(h.ad.Messages(dmConv))
	if posted < 3 {
		t.Fatalf("the answer took %d messages; the test needs it split", posted)
	}
	h2, before := crashAndRestart(t, h, tr, withCaps(small))
	checkAnsweredOnce(t, h2, before, answer, posted)
}

// TestCrashBeforeTheFirstPostPostsTheAnswerOnce: pibot dies while the
// reply's first (and only) message is on its way to the platform, which
// never gets it. The answer is in the session file already: the restart
// posts it once, without asking the model again.
func TestCrashBeforeTheFirstPostPostsTheAnswerOnce(t *testing.T) {
	t.Parallel()
	const answer = "short END"
	tr := newTrap(t)
	h := newHarness(t, []faux.Turn{faux.Text(answer)},
		withAdapter(func(ad *chattest.Adapter) chat.Adapter { return sendTrap{Adapter: ad, sub: "END", tr: tr} }))
	h.send("the question")
	tr.wait(t, "the first post")
	h2, _ := crashAndRestart(t, h, tr)
	h2.waitFor("the delivery recorded", func() bool { return len(deliveries(h2)) == 1 })
	h2.waitFor("the inbox to empty", func() bool { return h2.inbox.Len() == 0 })
	if n := h2.model.Calls(); n != 0 {
		t.Errorf("the model was asked %d times after the crash; its answer was stored", n)
	}
	if msgs := h2.ad.Messages(dmConv); len(msgs) != 1 || msgs[0] != answer {
		t.Fatalf("chat %q, want the answer once", msgs)
	}
}
