package e2e_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/providers/faux"
)

// A DM: top-level messages are the main line, answered at top level; a
// thread on an earlier answer is a branch from that answer, and the model
// sees exactly the branch's history.
func TestSlackDMMainLineAndThreadBranch(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("answer one"), faux.Text("answer two"), faux.Text("answer three")})
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "first question"})
	a1 := w.waitSlack(slackOwnerDM, "", "answer one")
	if a1.ThreadTS != "" {
		t.Errorf("a main-line answer in a thread: %+v", a1)
	}
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "second question"})
	w.waitSlack(slackOwnerDM, "", "answer two")
	w.waitBranch(slackLoc(slackOwnerDM, ""), []string{"user:first question", "assistant:answer one",
		"user:second question", "assistant:answer two"})

	// A thread on the first answer: the main line has moved on since.
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "back to the first", ThreadTS: a1.TS})
	a3 := w.waitSlack(slackOwnerDM, a1.TS, "answer three")
	if a3.ThreadTS != a1.TS {
		t.Errorf("the branch's answer is not in the thread: %+v", a3)
	}
	reqs := w.model.Requests()
	want := []string{"user:first question", "assistant:answer one", "user:back to the first"}
	if got := requestTexts(reqs[len(reqs)-1]); !slices.Equal(got, want) {
		t.Errorf("the branch's request = %q, want %q", got, want)
	}
	w.waitBranch(slackLoc(slackOwnerDM, ""), []string{"user:first question", "assistant:answer one",
		"user:second question", "assistant:answer two"})
	if got := len(w.botMessages(slackOwnerDM, "")); got != 3 {
		t.Errorf("%d bot messages, want 3", got)
	}
}

// The same event three times and its app_mention twin: one run, one
// answer. Here in a DM (three deliveries) and in a channel (with the
// twin).
func TestSlackDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("only once"), faux.Text("again once")})
	ts, bodies := w.slack.Post(slacktest.Say{Channel: slackOwnerDM, User: slackOwner, Text: "hello"})
	for range 3 {
		w.deliver("events_api", bodies[0])
	}
	w.waitSlack(slackOwnerDM, "", "only once")
	_ = ts
	ts2, bodies2 := w.slack.Post(slacktest.Say{Channel: slackChannel, User: slackOwner, Text: slackMention + " hello"})
	if len(bodies2) != 2 {
		t.Fatalf("want the app_mention twin")
	}
	for _, b := range [][]byte{bodies2[0], bodies2[1], bodies2[0], bodies2[0]} {
		w.deliver("events_api", b)
	}
	w.waitFor("the channel answer", func() bool {
		for _, m := range w.slack.Messages(slackChannel) {
			if strings.Contains(m.Text, "again once") && (m.Stream == nil || m.Stream.Stopped) {
				return true
			}
		}
		return false
	})
	w.never("a second run", 500*time.Millisecond, func() bool { return w.model.Calls() > 2 })
	n := 0
	for _, m := range w.slack.Messages(slackChannel) {
		n += strings.Count(m.Text, "again once")
	}
	if n != 1 {
		t.Errorf("the channel answer shows %d times", n)
	}
	_ = ts2
}

// A socket refresh in the middle of a reply loses nothing: the reply is
// finished once, and the next message is answered.
func TestSlackSocketRefreshMidReply(t *testing.T) {
	t.Parallel()
	long := words("part", 60)
	w := newSlackWorld(t, []faux.Turn{faux.Text(long).WithDelay(20 * time.Millisecond), faux.Text("after the refresh")})
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "talk for a while"})
	w.waitFor("the reply to start", func() bool { return len(w.botMessages(slackOwnerDM, "")) > 0 })
	w.slack.Disconnect("refresh_requested")
	if err := w.slack.WaitConnected(2, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	w.waitSlack(slackOwnerDM, "", "part60")
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "still there?"})
	w.waitSlack(slackOwnerDM, "", "after the refresh")
	if n := len(w.botMessages(slackOwnerDM, "")); n != 2 {
		t.Errorf("%d bot messages, want 2", n)
	}
	w.waitBranch(slackLoc(slackOwnerDM, ""), []string{"user:talk for a while", "assistant:" + long,
		"user:still there?", "assistant:after the refresh"})
}

// A storm of 429s on updates and appends: the final text is delivered
// once, and no call comes inside a Retry-After window (checked at the
// end by the world).
func TestSlack429Storm(t *testing.T) {
	t.Parallel()
	long := words("w", 80)
	var paras []string
	for i := range 8 {
		paras = append(paras, words("p"+strconv.Itoa(i)+"w", 10)+".")
	}
	threaded := strings.Join(paras, "\n\n") + " again"
	w := newSlackWorld(t, []faux.Turn{faux.Text(long).WithDelay(15 * time.Millisecond), faux.Text(threaded).WithDelay(15 * time.Millisecond)})
	w.slack.Fail("chat.update", 3, slacktest.Fault{Kind: slacktest.Fault429, RetryAfter: 1})
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "story please"})
	final := w.waitSlack(slackOwnerDM, "", "w80")
	if final.Text != long {
		t.Errorf("final text %q", final.Text)
	}
	// In a thread: the native stream, whose appends are refused.
	w.slack.Fail("chat.appendStream", 3, slacktest.Fault{Kind: slacktest.Fault429, RetryAfter: 1})
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "in a thread", ThreadTS: final.TS})
	m := w.waitSlack(slackOwnerDM, final.TS, "again")
	if m.Text != threaded {
		t.Errorf("streamed text %q", m.Text)
	}
	n := 0
	for _, x := range w.botMessages(slackOwnerDM, final.TS) {
		n += strings.Count(x.Text, "again")
	}
	if n != 1 {
		t.Errorf("the final text shows %d times in the thread", n)
	}
	limited := 0
	for _, c := range w.slack.Calls() {
		if c.Code == 429 {
			limited++
		}
	}
	if limited != 6 {
		t.Errorf("%d calls answered 429, want the 6 injected", limited)
	}
}

// HTTP mode: a bad signature is refused with 401 and nothing runs; a
// signed delivery runs.
func TestSlackHTTPBadSignature(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("signed ok")}, slackHTTP())
	_, bodies := w.slack.Post(slacktest.Say{Channel: slackOwnerDM, User: slackOwner, Text: "run rm -rf /"})
	r := w.slack.Request(w.events, bodies[0], 0)
	r.Header.Set("X-Slack-Signature", slacktest.Sign("forged", time.Now().Unix(), bodies[0]))
	if code, _ := w.post(r); code != 401 {
		t.Fatalf("forged delivery: HTTP %d, want 401", code)
	}
	w.never("a run of the forged message", 300*time.Millisecond, func() bool { return w.model.Calls() > 0 })
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "hi"})
	w.waitSlack(slackOwnerDM, "", "signed ok")
	if w.model.Calls() != 1 {
		t.Errorf("%d model calls, want 1", w.model.Calls())
	}
}

// A thread on a message pibot never saw (Slack's assistant pane opens
// each conversation as such a thread) is a conversation of its own.
func TestSlackThreadOnUnknownMessage(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("fresh answer")})
	root, _ := w.slack.Post(slacktest.Say{Channel: slackOwnerDM, User: slackOwner, Text: "never delivered"})
	w.say(slacktest.Say{Channel: slackOwnerDM, Text: "hello in a new thread", ThreadTS: root})
	w.waitSlack(slackOwnerDM, root, "fresh answer")
	if got := requestTexts(w.model.Requests()[0]); !slices.Equal(got, []string{"user:hello in a new thread"}) {
		t.Errorf("request %q", got)
	}
}

// A stranger's DM gets a pairing code and nothing else.
func TestSlackStrangerGetsPairingCode(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("should not run")})
	w.say(slacktest.Say{Channel: "D900", User: "USTRANGER", Text: "run ls /"})
	w.waitFor("a pairing answer", func() bool {
		for _, m := range w.botMessages("D900", "") {
			if strings.Contains(strings.ToLower(m.Text), "pairing") {
				return true
			}
		}
		for _, e := range w.slack.Ephemerals() {
			if strings.Contains(strings.ToLower(e.Text), "pairing") {
				return true
			}
		}
		return false
	})
	w.never("a model call for a stranger", 300*time.Millisecond, func() bool { return w.model.Calls() > 0 })
}
