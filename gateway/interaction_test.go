package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
)

// viaInteraction marks a command as delivered as a platform interaction
// (a Slack slash command, a Discord application command) with handle id.
func viaInteraction(id string) msgOpt {
	return func(in *chat.Inbound) {
		in.Interaction = &chat.Interaction{Platform: "test", ID: id, Deadline: time.Now().Add(time.Minute)}
	}
}

// ephemeralCaps makes the fake hide ephemeral messages from all but their
// user, as Slack and Discord do.
func ephemeralCaps(c *chat.Caps) { c.Ephemeral = true }

// responds returns the Responder.Answer calls so far.
func (h *harness) responds() []chattest.Call {
	return chattest.Filter(h.ad.Calls(), chattest.MethodRespond)
}

// waitResponds waits until there are n Responder.Answer calls.
func (h *harness) waitResponds(n int) []chattest.Call {
	h.t.Helper()
	h.waitFor("interaction answers", func() bool { return len(h.responds()) >= n })
	return h.responds()
}

// TestInteractionCommandsAnswered: commands that arrive as interactions
// are answered through the interaction, what only the sender needs
// (/help, /status, a /model look, usage lines, unknown commands) for their
// eyes only, a change the conversation should see (/model set) visibly;
// and each interaction exactly once.
func TestInteractionCommandsAnswered(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("hello back")}, withCaps(ephemeralCaps))
	h.send("hello")
	h.waitText(dmConv, "hello back")

	cases := []struct {
		text, id string
		private  bool
		want     string
	}{
		{"/help", "ix-help", true, "**Commands**"},
		{"/status", "ix-status", true, "**Session**"},
		{"/model", "ix-model", true, "Model: `faux/m`"},
		{"/thinking loud", "ix-think", true, "Usage: `/thinking"},
		{"/nosuch", "ix-unknown", true, "Unknown command `/nosuch`"},
		{"/model faux/m", "ix-set", false, "Model set to `faux/m`"},
	}
	for i, tc := range cases {
		h.send(tc.text, viaInteraction(tc.id))
		calls := h.waitResponds(i + 1)
		c := calls[i]
		if c.Err != nil {
			t.Fatalf("%s: answer failed: %v", tc.text, c.Err)
		}
		wantEph := ""
		if tc.private {
			wantEph = "owner"
		}
		if c.Ephemeral != wantEph {
			t.Errorf("%s: answered with Ephemeral %q, want %q", tc.text, c.Ephemeral, wantEph)
		}
		var seen []string
		if tc.private {
			seen = h.ad.Ephemerals(dmConv, "owner")
		} else {
			seen = h.ad.Messages(dmConv)
		}
		if len(seen) == 0 || !strings.Contains(seen[len(seen)-1], tc.want) {
			t.Errorf("%s: last answer = %q, want it to contain %q", tc.text, seen, tc.want)
		}
	}
	for _, c := range h.responds() {
		if c.Err != nil {
			t.Errorf("an interaction was answered twice or wrongly: %v", c.Err)
		}
	}
	// Only the first message of the session and its answer are visible;
	// the looks went to the owner alone.
	if got := h.ad.Messages(dmConv); len(got) != 2 {
		t.Errorf("visible messages = %q, want the answer and the /model change", got)
	}
}

// TestInteractionCommandNeverLeftHanging: an interaction is answered on
// every path: a refusal, "no session", a sender in a group that is not
// listed (told so alone, nothing posted), and /steer, whose words are the
// run's.
func TestInteractionCommandNeverLeftHanging(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("steered answer")}, withCaps(ephemeralCaps))

	// A member may not compact the group's conversation.
	h.send("/compact", inConv(groupConv), from("bob"), viaInteraction("ix-refused"))
	calls := h.waitResponds(1)
	if eph := h.ad.Ephemerals(groupConv, "bob"); calls[0].Ephemeral != "bob" || len(eph) != 1 || !strings.Contains(eph[0], "Only an owner") {
		t.Errorf("refusal: answer %+v, bob sees %q", calls[0], eph)
	}
	// A command that needs a session where there is none.
	h.send("/tree", inConv(groupConv), from("bob"), viaInteraction("ix-nosession"))
	calls = h.waitResponds(2)
	if calls[1].Ephemeral != "bob" {
		t.Errorf("no session: answer %+v, want one for bob only", calls[1])
	}
	// A stranger in a group that is not listed: told, alone, that the bot
	// is not enabled there (issue #30.12: an empty answer showed nothing).
	other := chat.ConvRef{Platform: "test", Channel: "unlisted-group"}
	h.send("/status", inConv(other), from("mallory"), viaInteraction("ix-ignored"))
	calls = h.waitResponds(3)
	if eph := h.ad.Ephemerals(other, "mallory"); calls[2].Err != nil || calls[2].Ephemeral != "mallory" || len(eph) != 1 || !strings.Contains(eph[0], "not enabled in this channel") {
		t.Errorf("unlisted group: answer %+v, mallory sees %q; want \"not enabled\" for mallory only", calls[2], eph)
	}
	if got := h.ad.Messages(other); len(got) != 0 {
		t.Errorf("an ignored command got %q in the unlisted group", got)
	}
	// /steer: the spinner ends, and the text runs as a message.
	h.send("/steer go on", inConv(groupConv), from("bob"), viaInteraction("ix-steer"))
	calls = h.waitResponds(4)
	if c := calls[3]; c.Err != nil || c.Text != "" {
		t.Errorf("/steer: answer %+v, want an empty one", c)
	}
	h.waitText(groupConv, "steered answer")
	for _, c := range calls {
		if c.Err != nil {
			t.Errorf("answer failed: %v", c.Err)
		}
	}
}

// TestTextCommandAnswersAsBefore: a text command (no interaction) is
// answered with a plain reply, even where the platform has ephemeral
// messages, and nothing goes through a Responder.
func TestTextCommandAnswersAsBefore(t *testing.T) {
	h := newHarness(t, nil, withCaps(ephemeralCaps))
	h.send("/help")
	h.waitText(dmConv, "**Commands**")
	if n := len(h.responds()); n != 0 {
		t.Errorf("%d Responder calls for a text command", n)
	}
}
