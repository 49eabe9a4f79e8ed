package e2e_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// liveCalls counts the calls that only show progress (drafts and edits).
func liveCalls(s *telegramtest.Server) int {
	return len(s.Calls("sendMessageDraft", "editMessageText"))
}

// A long streamed reply meets a 429 storm: every draft is refused with
// retry_after, and the final send twice. No call may arrive before a
// retry_after expired, the final text is complete, and pibot makes fewer
// progress calls than the same reply without the storm.
func TestRateLimitStorm(t *testing.T) {
	t.Parallel()
	answer := words("w", 70) + "."
	script := []faux.Turn{faux.Text(answer).WithDelay(100 * time.Millisecond)}
	calm := newWorld(t, script)
	storm := newWorld(t, script)
	storm.srv.Fail("sendMessageDraft", 100, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 1})
	storm.srv.Fail("sendMessage", 2, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 1})

	var wg sync.WaitGroup
	for _, w := range []*world{calm, storm} {
		w.say(ownerChat, owner, "a long answer please")
	}
	finals := make([]telegramtest.Message, 2)
	for i, w := range []*world{calm, storm} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.waitFor("the final message", func() bool { return len(w.withText(ownerChat, "w70.")) > 0 })
			finals[i] = w.withText(ownerChat, "w70.")[0]
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, f := range finals {
		if f.Text != answer {
			t.Errorf("world %d: final text = %q, want the complete answer", i, f.Text)
		}
	}
	if v := storm.srv.Violations(); len(v) > 0 {
		t.Errorf("calls arrived before retry_after expired: %q", v)
	}
	if n := len(storm.srv.Messages(ownerChat)); n != 1 {
		t.Errorf("storm: %d bot messages, want 1", n)
	}
	sends := storm.srv.Calls("sendMessage")
	if len(sends) != 3 || sends[2].Code != 200 {
		t.Errorf("storm: sendMessage calls = %d, want two 429s then the final", len(sends))
	}
	if liveCalls(storm.srv) == 0 {
		t.Errorf("storm: no draft was even tried")
	}
	if c, s := liveCalls(calm.srv), liveCalls(storm.srv); s >= c {
		t.Errorf("progress calls: %d under the storm, %d without; want fewer under the storm", s, c)
	}
	t.Logf("progress calls: %d calm, %d storm", liveCalls(calm.srv), liveCalls(storm.srv))
}

// The final send meets a torn network (502, then a dropped connection) and
// then succeeds: the reply is delivered exactly once.
func TestTornNetworkDuringFinalSend(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []faux.Turn{faux.Text("the final answer arrives once")})
	w.srv.Fail("sendMessage", 1, telegramtest.Fault{Kind: telegramtest.Fault5xx})
	w.srv.Fail("sendMessage", 1, telegramtest.Fault{Kind: telegramtest.FaultClose})
	w.say(ownerChat, owner, "hello")
	final := w.waitMessage(ownerChat, "the final answer arrives once")
	w.never("a second copy of the reply", 500*time.Millisecond, func() bool {
		return len(w.withText(ownerChat, "the final answer arrives once")) > 1
	})
	var codes []int
	for _, c := range w.srv.Calls("sendMessage") {
		codes = append(codes, c.Code)
	}
	if len(codes) != 3 || codes[0] != 502 || codes[1] != 0 || codes[2] != 200 {
		t.Errorf("sendMessage answers = %v, want [502 0 200]", codes)
	}
	loc := locKey(ownerChat, 0)
	w.waitBranch(loc, []string{"user:hello", "assistant:the final answer arrives once"})
	path, _ := w.head(loc)
	s := w.openSession(path)
	defer s.Close()
	var deliveries []string
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeCustom && e.CustomType == "pibot.delivery" && e.Pibot != nil {
			deliveries = append(deliveries, e.Pibot.Msg)
		}
	}
	if len(deliveries) != 1 || deliveries[0] != msgKey(ownerChat, 0, final.ID) {
		t.Errorf("delivery records = %q, want one for message %d", deliveries, final.ID)
	}
}

// pibot takes an update, answers it, and dies before the next getUpdates
// confirms it; the new process is served the same update_id again and
// must neither record it twice nor answer it twice.
func TestDuplicateUpdateAfterCrash(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []faux.Turn{faux.Text("answered once")}, withProxy())
	w.proxy.armed.Store(true)
	q := w.srv.UserMessage(ownerChat, owner, "hello once")
	updateID := w.srv.AddMessage(q)
	w.waitMessage(ownerChat, "answered once")
	loc := locKey(ownerChat, 0)
	w.waitBranch(loc, []string{"user:hello once", "assistant:answered once"})
	w.waitFor("a confirming getUpdates blocked", func() bool { return w.proxy.blocking.Load() })
	if n := w.srv.Pending(); n != 1 {
		t.Fatalf("the fake holds %d unconfirmed updates, want 1", n)
	}
	w.stop()
	w.proxy.armed.Store(false)
	w.proxy.blocking.Store(false)
	w.start()

	w.waitFor("the update confirmed by the new process", func() bool { return w.srv.Pending() == 0 })
	if n := w.proxy.timesServed(updateID); n != 2 {
		t.Fatalf("update %d was served %d times, want 2 (the test did not redeliver it)", updateID, n)
	}
	w.never("a second run", time.Second, func() bool { return w.model.Calls() > 1 })
	if got := w.withText(ownerChat, "answered once"); len(got) != 1 {
		t.Errorf("%d replies, want 1", len(got))
	}
	path, _ := w.head(loc)
	s := w.openSession(path)
	defer s.Close()
	var users int
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeMessage && e.Message.Role == llm.RoleUser {
			users++
			if e.Pibot == nil || e.Pibot.Msg != msgKey(ownerChat, 0, q.ID) {
				t.Errorf("user entry meta = %+v", e.Pibot)
			}
		}
	}
	if users != 1 {
		t.Errorf("%d user messages in the session, want 1", users)
	}
}

// Every log line of a run with transport failures on every kind of call is
// free of the bot token (Go's *url.Error prints the request URL, which
// holds it).
func TestTokenNeverLogged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []faux.Turn{faux.Text(words("secret-safe", 30)).WithDelay(40 * time.Millisecond)}, withNoStart())
	for _, m := range []string{"getMe", "deleteWebhook", "getUpdates", "sendChatAction", "sendMessageDraft", "sendMessage"} {
		w.srv.Fail(m, 1, telegramtest.Fault{Kind: telegramtest.FaultClose})
	}
	// Enough failures that registering the commands gives up and the
	// gateway logs the error it got.
	w.srv.Fail("setMyCommands", 4, telegramtest.Fault{Kind: telegramtest.FaultClose})
	w.start()
	w.say(ownerChat, owner, "hi")
	w.waitMessage(ownerChat, "secret-safe30")
	w.stop()
	logs := w.logs.String()
	for _, want := range []string{"register commands", "op=getMe", "op=send ", "getUpdates failed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no log line mentions %q; the failures were not logged", want)
		}
	}
	if !strings.Contains(logs, "127.0.0.1") {
		t.Errorf("no log line carries a request URL; the test does not exercise *url.Error")
	}
	assertNoToken(t, logs)
}
