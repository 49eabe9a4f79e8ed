package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/providers/faux"
)

// /pi approve with an id that never existed says the id is unknown, not
// "Already decided" (issue #30.12).
func TestDiscordApproveUnknownID(t *testing.T) {
	t.Parallel()
	dw := newDiscordWorld(t, []faux.Turn{faux.Text("hello there")})
	m := dw.say(dChan, dOwner, "hi", true, "")
	dw.waitText(m.ID, dOwner.ID, "hello there") // the thread has a session
	dw.dsrv.Command(m.ID, dOwner, "pi", discordtest.Option{Name: "approve", Type: 1,
		Options: []discordtest.Option{{Name: "args", Type: 3, Value: "0123abcd"}}})
	got := dw.waitText(m.ID, dOwner.ID, "No approval with that id")
	if strings.Contains(got.Content, "Already decided") {
		t.Errorf("answer %q", got.Content)
	}
}

// /pi status in a channel that is not in access.groups gets an ephemeral
// answer saying the bot is not enabled there, naming nothing of the
// configuration; nothing runs and nothing is posted for everyone
// (issue #30.12).
func TestSlackCommandInUnlistedChannel(t *testing.T) {
	t.Parallel()
	w := newSlackWorld(t, []faux.Turn{faux.Text("must not run")})
	w.command(slackOther, slackBob, "status")
	var e slacktest.Ephemeral
	w.waitFor("an ephemeral answer", func() bool {
		for _, x := range w.slack.Ephemerals() {
			if x.Channel == slackOther {
				e = x
				return true
			}
		}
		return false
	})
	if e.User != slackBob || !strings.Contains(e.Text, "not enabled in this channel") {
		t.Errorf("answer %+v", e)
	}
	for _, leak := range []string{slackChannel, slackOwner, "access.", "slack:"} {
		if strings.Contains(e.Text, leak) {
			t.Errorf("the answer names %q: %q", leak, e.Text)
		}
	}
	w.never("a visible message or a model call", 300*time.Millisecond, func() bool {
		return len(w.botMessages(slackOther, "")) > 0 || w.model.Calls() > 0
	})
}
