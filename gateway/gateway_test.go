package gateway_test

import (
	"encoding/json"
	"slices"
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

func TestDMConversationStreamsAndPersists(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("Hello there, I am the faux model and I stream tokens.").WithDelay(5 * time.Millisecond)})
	in := h.send("hi")
	h.waitText(dmConv, "I am the faux model")
	h.waitFor("delivery record", func() bool {
		ss := h.sessions()
		if len(ss) != 1 {
			return false
		}
		for _, e := range h.entries(ss[0]) {
			if e.CustomType == "pibot.delivery" {
				return true
			}
		}
		return false
	})
	es := h.entries(h.sessions()[0])
	var user, assistant *session.Entry
	for i := range es {
		e := &es[i]
		if e.Type == session.TypeMessage && e.Message.Role == llm.RoleUser {
			user = e
		}
		if e.Type == session.TypeMessage && e.Message.Role == llm.RoleAssistant {
			assistant = e
		}
	}
	if user == nil || assistant == nil {
		t.Fatalf("session lacks user or assistant message: %+v", es)
	}
	if user.Pibot == nil || user.Pibot.Msg != in.Msg.Key() || user.Pibot.From != "owner" || user.Pibot.Loc != dmConv.Key() {
		t.Errorf("user entry meta = %+v", user.Pibot)
	}
	// Between the two only custom entries (the reply journal), which the
	// model's context skips.
	parent := assistant.ParentID
	for _, e := range slices.Backward(es) {
		if e.ID == parent && e.Type == session.TypeCustom {
			parent = e.ParentID
		}
	}
	if parent != user.ID {
		t.Errorf("assistant hangs off %s, want user %s", parent, user.ID)
	}
	if es[0].Type != session.TypeModelChange {
		t.Errorf("first entry %s, want model_change", es[0].Type)
	}
	// The reply answers the user's message.
	sends := chattest.Filter(h.ad.Calls(), chattest.MethodSend)
	if len(sends) == 0 || sends[0].ReplyTo == nil || sends[0].ReplyTo.ID != in.Msg.ID {
		t.Errorf("first send does not reply to the user message: %+v", sends)
	}
	// The inbox lets go of the message once the run is over and on disk.
	h.waitFor("inbox acknowledged", func() bool { return len(pendingOf(h)) == 0 })
}

func TestReplyBranchesFromThatMessage(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer"), faux.Text("branched answer")})
	h.send("one")
	h.waitText(dmConv, "first answer")
	h.waitFor("first delivery", func() bool { return len(deliveries(h)) == 1 && h.inbox.Len() == 0 })
	first := deliveries(h)[0]
	h.send("two")
	h.waitText(dmConv, "second answer")
	h.waitFor("second delivery", func() bool { return len(deliveries(h)) == 2 && h.inbox.Len() == 0 })
	// Reply to the first answer: the new message branches from there.
	h.send("alternative", replyTo(first))
	h.waitText(dmConv, "branched answer")
	h.waitFor("third delivery", func() bool { return len(deliveries(h)) == 3 && h.inbox.Len() == 0 })
	path := h.sessions()[0]
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	head, _ := s.Tree().Head(dmConv.Key())
	got := h.branchTexts(path, head)
	want := []string{"user:one", "assistant:first answer", "user:alternative", "assistant:branched answer"}
	if !slices.Equal(got, want) {
		t.Fatalf("branch after reply = %q, want %q", got, want)
	}
	// The model saw the branch, not the abandoned "two".
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1]
	for _, m := range last.Messages {
		if m.Text() == "two" {
			t.Fatal("model saw the abandoned branch")
		}
	}
}

// deliveries returns the reply message refs recorded by the adapter, one per
// finished reply (the last message of each).
func deliveries(h *harness) []chat.MsgRef {
	var out []chat.MsgRef
	for _, p := range h.sessions() {
		for _, e := range h.entries(p) {
			if e.CustomType == "pibot.delivery" {
				var d struct{ Refs []string }
				_ = json.Unmarshal(e.Data, &d)
				if len(d.Refs) > 0 {
					k := d.Refs[len(d.Refs)-1]
					conv, id, _ := strings.Cut(k, "#")
					_ = conv
					out = append(out, chat.MsgRef{Conv: dmConv, ID: id})
				}
			}
		}
	}
	return out
}

func TestThreadBranchesSameSession(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("main answer"), faux.Text("thread answer")})
	in := h.send("root question")
	h.waitText(dmConv, "main answer")
	h.waitFor("delivery", func() bool { return len(deliveries(h)) == 1 && h.inbox.Len() == 0 })
	thread := dmConv
	thread.Thread = in.Msg.ID
	h.send("in thread", inConv(thread))
	h.waitText(thread, "thread answer")
	if n := len(h.sessions()); n != 1 {
		t.Fatalf("thread created %d sessions, want 1 (a branch of the same session)", n)
	}
	// The thread hangs off the root question itself: it sees the question
	// but not the main line's answer, which is another child of it.
	if got, want := h.lastRequestTexts(), []string{"root question", "in thread"}; !slices.Equal(got, want) {
		t.Fatalf("thread request = %q, want %q", got, want)
	}
}

func TestDuplicateEventsAreDropped(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("only once")})
	h.send("hello", dedup("evt-1"))
	h.send("hello", dedup("evt-1"))
	h.waitText(dmConv, "only once")
	h.waitFor("delivery", func() bool { return len(deliveries(h)) == 1 && h.inbox.Len() == 0 })
	if n := h.model.Calls(); n != 1 {
		t.Fatalf("model called %d times for a duplicated event", n)
	}
	if got := userTexts(h.entries(h.sessions()[0])); len(got) != 1 {
		t.Fatalf("user messages = %q", got)
	}
}

func TestUnknownCommandAndHelp(t *testing.T) {
	h := newHarness(t, nil)
	h.send("/frobnicate")
	h.waitText(dmConv, "Unknown command `/frobnicate`")
	h.send("/help")
	h.waitText(dmConv, "/steer TEXT", "/tree")
	h.send("/whoami")
	h.waitText(dmConv, "test:owner", "owner")
	// In a group /whoami also names the group as access.groups lists it.
	h.send("/whoami", inConv(groupConv), from("alice"))
	h.waitText(groupConv, "test:alice", "This group is `test:group`")
	for _, m := range h.ad.Messages(dmConv) {
		if strings.Contains(m, "This group is") {
			t.Errorf("/whoami in a DM names a group: %q", m)
		}
	}
	if h.model.Calls() != 0 {
		t.Fatal("commands reached the model")
	}
}

func TestNoModelConfiguredStillKeepsTheMessage(t *testing.T) {
	h := newHarness(t, nil, withConfig(func(c *gateway.Config) { c.Model = ""; c.NoModelHelp = "Set OPENAI_API_KEY." }))
	h.send("anyone there?")
	h.waitText(dmConv, "Set OPENAI_API_KEY.")
	h.waitFor("session", func() bool {
		ss := h.sessions()
		return len(ss) == 1 && slices.Contains(userTexts(h.entries(ss[0])), "anyone there?")
	})
	// /model and /status say there is none and how to set one.
	h.send("/model")
	h.waitText(dmConv, "Model: none configured. Set OPENAI_API_KEY.")
	h.send("/status")
	h.waitText(dmConv, "model: none configured (Set OPENAI_API_KEY.)", "1 message in context")
}
