package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// TestWaitingMessageIsNotSetAsideByACrashLoop: a message whose run hangs
// ("bomb", standing for one that takes pibot down) is executing during
// two crashes in a row; a second message of the same chat only waits for
// that run meanwhile (steered into it, never taken). The bomb is set
// aside; the waiting message is not, and is answered. (Before, every
// message accepted or taken counted each crash: both were set aside.)
func TestWaitingMessageIsNotSetAsideByACrashLoop(t *testing.T) {
	model := faux.Turn{Reply: func(req llm.Request) faux.Turn {
		if strings.Contains(req.Messages[len(req.Messages)-1].Text(), "bomb") {
			return faux.Text("boom").WithDelay(time.Hour)
		}
		return faux.Text("fine, thanks")
	}}
	steer := withConfig(func(c *gateway.Config) { c.QueueMode = "steer"; fastDrain(c) })
	h1 := newHarness(t, []faux.Turn{model}, steer)
	h1.send("bomb")
	h1.waitFor("the bomb's run", func() bool { return h1.model.Calls() == 1 })
	h1.send("innocent")
	h1.waitText(dmConv, "will steer the current run")
	h1.waitFor("both messages in the inbox file", func() bool { return pendingOnDisk(t, crashCopy(t, h1.dir)) == 2 })
	crash1 := crashCopy(t, h1.dir)
	h1.stop()

	h2 := newHarness(t, []faux.Turn{model}, withDir(crash1), steer)
	h2.waitFor("the bomb run again", func() bool { return h2.model.Calls() == 1 })
	crash2 := crashCopy(t, h2.dir)
	h2.stop()

	h3 := newHarness(t, []faux.Turn{model}, withDir(crash2), steer)
	h3.waitText(dmConv, "set aside")
	h3.waitText(dmConv, "fine, thanks")
	h3.waitFor("an empty inbox", func() bool { return h3.inbox.Len() == 0 })
	q, err := h3.inbox.Quarantined(t.Context())
	if err != nil || len(q) != 1 || !strings.Contains(string(q[0].Data), "bomb") {
		t.Fatalf("quarantined = %+v, %v; want the bomb alone", q, err)
	}
	if n := h3.countIn("set aside"); n != 1 {
		t.Fatalf("%d set-aside notices, want 1: %q", n, h3.ad.Messages(dmConv))
	}
}

// TestAnsweredMessageIsNotSetAside: a message's answer is in the session
// but pibot crashes before its delivery is recorded, twice in a row (the
// second time while the restart delivers it). The message was executing
// during both crashes, but it is answered: it is not set aside and its
// sender gets no notice; the third start delivers the answer.
func TestAnsweredMessageIsNotSetAside(t *testing.T) {
	t.Parallel()
	answer := strings.Repeat("word ", 20) + "END"
	tr1 := newTrap(t)
	h1 := newHarness(t, []faux.Turn{faux.Text(answer).WithDelay(5 * time.Millisecond)}, withSessionFiles(deliveryTrap{session.FileStorage{}, tr1}))
	h1.send("the question")
	tr1.wait(t, "its end write")
	crash1 := crashCopy(t, h1.dir)
	tr1.open()
	h1.stop()

	tr2 := newTrap(t)
	h2 := newHarness(t, []faux.Turn{faux.Text("ASKED AGAIN")}, withDir(crash1), withSessionFiles(deliveryTrap{session.FileStorage{}, tr2}))
	tr2.wait(t, "the delivery of the stored answer")
	crash2 := crashCopy(t, h2.dir)
	tr2.open()
	h2.stop()

	h3 := newHarness(t, []faux.Turn{faux.Text("ASKED AGAIN")}, withDir(crash2))
	h3.waitText(dmConv, "END")
	h3.waitFor("the inbox to empty", func() bool { return h3.inbox.Len() == 0 })
	if q, err := h3.inbox.Quarantined(t.Context()); err != nil || len(q) != 0 {
		t.Fatalf("quarantined = %+v, %v; want nothing", q, err)
	}
	time.Sleep(200 * time.Millisecond)
	msgs := h3.ad.Messages(dmConv)
	joined := strings.Join(msgs, "\n")
	if strings.Contains(joined, "set aside") || strings.Contains(joined, "ASKED AGAIN") || strings.Count(joined, "END") != 1 {
		t.Fatalf("chat %q, want the stored answer once and no notice", msgs)
	}
}

// TestSetAsideNoticeDoesNotHoldUpStartUp: the start after a crash loop
// sets a message aside; its notice goes out on the conversation's
// mailbox, so start-up (replays, the adapters) does not wait for the
// platform to take it. (Before, start-up posted each notice before it
// started the adapters: a platform pacing notices one per second held a
// restart up for as many seconds.)
func TestSetAsideNoticeDoesNotHoldUpStartUp(t *testing.T) {
	model := faux.Turn{Reply: func(req llm.Request) faux.Turn { return faux.Text("boom").WithDelay(time.Hour) }}
	h1 := newHarness(t, []faux.Turn{model}, withConfig(fastDrain))
	h1.send("bomb")
	h1.waitFor("the bomb's run", func() bool { return h1.model.Calls() == 1 })
	crash1 := crashCopy(t, h1.dir)
	h1.stop()
	h2 := newHarness(t, []faux.Turn{model}, withDir(crash1), withConfig(fastDrain))
	h2.waitFor("the bomb run again", func() bool { return h2.model.Calls() == 1 })
	crash2 := crashCopy(t, h2.dir)
	h2.stop()

	tr := newTrap(t)
	h3 := newHarness(t, []faux.Turn{model}, withDir(crash2), withConfig(fastDrain),
		withAdapter(func(ad *chattest.Adapter) chat.Adapter { return sendTrap{Adapter: ad, sub: "set aside", tr: tr} }))
	tr.wait(t, "the set-aside notice")
	select {
	case <-h3.g.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("start-up waits for the set-aside notice to be posted")
	}
	tr.open()
}
