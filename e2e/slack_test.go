package e2e_test

import (
	"slices"
	"strings"
	"testing"

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
	w.never("a second run", 500*1e6, func() bool { return w.model.Calls() > 2 })
	n := 0
	for _, m := range w.slack.Messages(slackChannel) {
		n += strings.Count(m.Text, "again once")
	}
	if n != 1 {
		t.Errorf("the channel answer shows %d times", n)
	}
	_ = ts2
}
