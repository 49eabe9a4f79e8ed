package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
)

// appendOnly is the chattest adapter as a platform whose native stream can
// only append (a Slack stand-in).
type appendOnly struct{ chattest.StreamAdapter }

func (a appendOnly) Caps(conv chat.ConvRef) chat.Caps {
	c := a.StreamAdapter.Caps(conv)
	c.NativeStream, c.AppendOnly = true, true
	c.TypingRefresh = time.Second
	return c
}

// TestAppendOnlyReply: through the gateway, a reply on an append-only
// stream is opened for the user who asked, grows only by appending
// finished text, and arrives whole.
func TestAppendOnlyReply(t *testing.T) {
	answer := "First, the plan.\n\nSecond, the details of it.\n\nThird, the end."
	turn := faux.Text(answer)
	turn.Delay = 20 * time.Millisecond
	h := newHarness(t, []faux.Turn{turn},
		withAdapter(func(ad *chattest.Adapter) chat.Adapter { return appendOnly{ad.Streaming()} }))
	h.send("explain")
	h.waitText(dmConv, "Third, the end.")
	calls := h.ad.Calls()
	opens := chattest.Filter(calls, chattest.MethodOpenStream)
	if len(opens) != 1 || opens[0].Recipient != "owner" {
		t.Errorf("stream opens = %+v, want one for the owner, who asked", opens)
	}
	if n := len(chattest.Filter(calls, chattest.MethodSend, chattest.MethodEdit)); n != 0 {
		t.Errorf("%d send/edit calls on an append-only platform", n)
	}
	prev := ""
	for _, c := range chattest.Filter(calls, chattest.MethodStreamUpdate, chattest.MethodStreamFinish) {
		if !strings.HasPrefix(c.Text, prev) || strings.Contains(c.Text, "▌") {
			t.Errorf("%s %q does not just append to %q", c.Method, c.Text, prev)
		}
		prev = c.Text
	}
	if got := h.ad.Messages(dmConv); len(got) != 1 || got[0] != answer {
		t.Errorf("messages = %q, want [%q]", got, answer)
	}
}
