package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
)

// withThreads gives the gateway the fake as a platform that opens a
// thread for the channel messages the bot answers (Discord, Slack).
func withThreads() option {
	return withAdapter(func(ad *chattest.Adapter) chat.Adapter { return ad.Threads() })
}

// threadOf is the thread opened on the channel message in.
func threadOf(in chat.Inbound) chat.ConvRef {
	c := in.Conv
	c.Thread = in.Msg.ID
	return c
}

// opens returns the OpenThread calls so far.
func (h *harness) opens() []chattest.Call {
	return chattest.Filter(h.ad.Calls(), chattest.MethodOpenThread)
}

// TestThreadOpenedAfterAccess: an allowed mention on a channel's main line
// opens a thread titled after the message, and the answer and the session
// live there; a stranger's mention in an unlisted channel opens nothing.
func TestThreadOpenedAfterAccess(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("answer in the thread")}, withThreads())

	other := chat.ConvRef{Platform: "test", Channel: "unlisted-group"}
	h.send("hey bot, open up", inConv(other), from("mallory"), mentioned())
	if n := len(h.opens()); n != 0 {
		t.Fatalf("an ignored message opened %d thread(s)", n)
	}

	in := h.send("  \nplan the release\nwith details", inConv(groupConv), from("alice"), mentioned())
	thread := threadOf(in)
	h.waitText(thread, "answer in the thread")
	opens := h.opens()
	if len(opens) != 1 || opens[0].Ref != in.Msg || opens[0].Text != "plan the release" {
		t.Errorf("thread opens = %+v, want one on %s titled %q", opens, in.Msg.Key(), "plan the release")
	}
	if got := h.ad.Messages(groupConv); len(got) != 0 {
		t.Errorf("the channel's main line got %q", got)
	}
	// Not a reply to a message of another conversation (the main line).
	for _, c := range chattest.Filter(h.ad.Calls(), chattest.MethodSend) {
		if c.ReplyTo != nil && c.ReplyTo.Conv != c.Conv {
			t.Errorf("send in %s replies to %s in another conversation", c.Conv.Key(), c.ReplyTo.Key())
		}
	}
	h.waitFor("the session's messages on disk", func() bool {
		files := h.sessions()
		return len(files) == 1 && len(userTexts(h.entries(files[0]))) == 1
	})
	if files := h.sessions(); len(files) != 1 {
		t.Fatalf("session files = %v", files)
	}
	es := h.entries(h.sessions()[0])
	if got := userTexts(es); len(got) != 1 || !strings.Contains(got[0], "plan the release") {
		t.Errorf("user messages in the session = %q", got)
	}
	if loc := es[0].Pibot; loc == nil || loc.Loc != thread.Key() {
		t.Errorf("the session's first entry is for %+v, want the thread %s", loc, thread.Key())
	}
}

// TestThreadOpenFailure: when the thread cannot be opened, the channel
// hears why and the message is answered on the main line: nothing lost.
func TestThreadOpenFailure(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("answer on the main line")}, withThreads())
	h.ad.FailNext(chattest.MethodOpenThread, 1, chattest.ErrServer)
	h.send("plan the release", inConv(groupConv), from("alice"), mentioned())
	h.waitText(groupConv, "could not open a thread")
	h.waitText(groupConv, "answer on the main line")
}

// TestBoundThreadNeedsNoMention: once the bot answers in a thread, people
// there need not mention it; a message on the main line without a mention,
// and one in a thread the bot is not in, are still ignored.
func TestBoundThreadNeedsNoMention(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("first"), faux.Text("second")}, withThreads())
	in := h.send("start", inConv(groupConv), from("alice"), mentioned())
	thread := threadOf(in)
	h.waitText(thread, "first")

	h.send("chatter on the main line", inConv(groupConv), from("bob"))
	stranger := groupConv
	stranger.Thread = "some-other-thread"
	h.send("chatter in a thread of people", inConv(stranger), from("bob"))
	if n := len(h.opens()); n != 1 {
		t.Errorf("%d threads opened, want only the first", n)
	}

	h.send("and then?", inConv(thread), from("bob"))
	h.waitText(thread, "second")
	if n := len(h.model.Requests()); n != 2 {
		t.Errorf("the model got %d requests, want 2 (unmentioned chatter reached it)", n)
	}
	if got := h.ad.Messages(stranger); len(got) != 0 {
		t.Errorf("the thread the bot is not in got %q", got)
	}
}

// TestMainLineCommandActsOnThread: a command on a channel's main line,
// which is not bound itself, acts on the channel's most recently active
// thread: /stop stops the run there, /status shows its session; the answer
// comes where the command was sent.
func TestMainLineCommandActsOnThread(t *testing.T) {
	g := newGate()
	h := newHarness(t, []faux.Turn{faux.Text("quiet"), faux.ToolCalls(faux.Call("c1", "slow", `{}`)), faux.Text("not reached")},
		withThreads(), withTools(g.tool("slow")), withCaps(ephemeralCaps))
	quiet := h.send("one", inConv(groupConv), from("owner"), mentioned())
	h.waitText(threadOf(quiet), "quiet")
	busy := h.send("two", inConv(groupConv), from("owner"), mentioned())
	<-g.started

	h.send("/status", inConv(groupConv))
	h.waitText(groupConv, "**Session**", "running")

	h.send("/stop", inConv(groupConv), viaInteraction("ix-stop"))
	calls := h.waitResponds(1)
	if eph := calls[0].Ephemeral; eph != "" {
		t.Errorf("/stop answered for %q only, want the channel to see it", eph)
	}
	h.waitText(groupConv, "Stopping")
	// The run in the busy thread ends without its tool finishing.
	h.waitText(threadOf(busy), "stopped by /stop")
	if got := h.ad.Messages(threadOf(quiet)); len(got) != 1 {
		t.Errorf("the quiet thread got %q", got)
	}
}

// TestThreadStreamRecipient: a native stream in a channel thread is opened
// for the user who asked, in the conversation's workspace (Slack's
// recipient_user_id and recipient_team_id).
func TestThreadStreamRecipient(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("streamed")},
		withAdapter(func(ad *chattest.Adapter) chat.Adapter { return slackLike{appendOnly{ad.Streaming()}} }))
	ws := chat.ConvRef{Platform: "test", Workspace: "T1", Channel: "group"}
	in := h.send("stream please", inConv(ws), from("alice"), mentioned())
	h.waitText(threadOf(in), "streamed")
	opens := chattest.Filter(h.ad.Calls(), chattest.MethodOpenStream)
	if len(opens) != 1 || opens[0].Recipient != "alice" || opens[0].RecipientTeam != "T1" || opens[0].Conv != threadOf(in) {
		t.Errorf("stream opens = %+v, want one in the thread for alice of T1", opens)
	}
}

// slackLike is an append-only streaming platform that opens threads.
type slackLike struct{ appendOnly }

func (s slackLike) OpenThread(ctx context.Context, msg chat.MsgRef, name string) (chat.ConvRef, error) {
	return s.Adapter.Threads().OpenThread(ctx, msg, name)
}
