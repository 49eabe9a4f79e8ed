package e2e_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// A private chat: the reply streams as drafts, then one final HTML
// message; the session file holds both messages with pibot's metadata.
func TestDMStreamingReply(t *testing.T) {
	t.Parallel()
	answer := "**Hello** Olga, " + words("token", 40) + "."
	visible := "Hello Olga, " + words("token", 40) + "."
	w := newWorld(t, []faux.Turn{faux.Text(answer).WithDelay(60 * time.Millisecond)})
	q := w.say(ownerChat, owner, "tell me a story")

	final := w.waitMessage(ownerChat, "token40.")
	if final.Text != visible {
		t.Errorf("final text = %q, want %q", final.Text, visible)
	}
	if final.ParseMode != "HTML" || !strings.Contains(final.Raw, "<b>Hello</b>") {
		t.Errorf("final message is not HTML from the markdown: mode %q, raw %q", final.ParseMode, final.Raw)
	}
	if final.ReplyTo != q.ID {
		t.Errorf("final message replies to %d, want the question %d", final.ReplyTo, q.ID)
	}
	if n := len(w.srv.Messages(ownerChat)); n != 1 {
		t.Errorf("%d bot messages in the chat, want 1: %q", n, texts(w.srv.Messages(ownerChat)))
	}

	drafts := w.srv.Drafts(ownerChat)
	if len(drafts) == 0 {
		t.Fatal("the reply was not streamed: no sendMessageDraft")
	}
	for _, d := range drafts {
		if !strings.HasPrefix(visible, d) {
			t.Errorf("draft %q is not a prefix of the reply", d)
		}
	}
	draftCalls := w.srv.Calls("sendMessageDraft")
	sends := w.srv.Calls("sendMessage")
	if len(sends) != 1 {
		t.Fatalf("sendMessage calls = %d, want 1 (the final)", len(sends))
	}
	for _, c := range draftCalls {
		if c.Time.After(sends[0].Time) {
			t.Errorf("a draft was sent after the final message")
		}
		if c.Params["draft_id"] != draftCalls[0].Params["draft_id"] {
			t.Errorf("draft ids differ within one reply: %q, %q", c.Params["draft_id"], draftCalls[0].Params["draft_id"])
		}
	}

	loc := locKey(ownerChat, 0)
	w.waitBranch(loc, []string{"user:tell me a story", "assistant:" + answer})
	path, _ := w.head(loc)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), `{"type":"session"`) {
		t.Errorf("session file does not start with a pi header: %.80s", raw)
	}
	// The delivery record follows the final message (group-committed).
	var user, assistant, delivery *session.Entry
	var n int
	for deadline := time.Now().Add(5 * time.Second); delivery == nil && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s := w.openSession(path)
		user, assistant, delivery, n = nil, nil, nil, s.Tree().Len()
		for _, e := range s.Tree().Entries() {
			switch {
			case e.Type == session.TypeMessage && e.Message.Role == llm.RoleUser:
				user = &e
			case e.Type == session.TypeMessage && e.Message.Role == llm.RoleAssistant:
				assistant = &e
			case e.Type == session.TypeCustom && e.CustomType == "pibot.delivery":
				delivery = &e
			}
		}
		s.Close()
	}
	if user == nil || assistant == nil {
		t.Fatalf("session lacks the user or assistant message: %d entries", n)
	}
	if m := user.Pibot; m == nil || m.Loc != loc || m.Msg != msgKey(ownerChat, 0, q.ID) || m.From != "1001" {
		t.Errorf("user entry meta = %+v, want loc %s, msg %s, from 1001", m, loc, msgKey(ownerChat, 0, q.ID))
	}
	if m := assistant.Pibot; m == nil || m.Loc != loc {
		t.Errorf("assistant entry meta = %+v, want loc %s", m, loc)
	}
	if assistant.ParentID != user.ID {
		t.Errorf("assistant entry's parent = %s, want the user entry %s", assistant.ParentID, user.ID)
	}
	if delivery == nil || delivery.Pibot == nil || delivery.Pibot.Msg != msgKey(ownerChat, 0, final.ID) {
		t.Errorf("no delivery record naming the final message %s: %+v", msgKey(ownerChat, 0, final.ID), delivery)
	}
}

// Replying to the bot's first answer branches from it: the model sees the
// first exchange only, and the location's head continues that branch.
func TestReplyBranches(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer"), faux.Text("branched answer")})
	w.say(ownerChat, owner, "one")
	first := w.waitMessage(ownerChat, "first answer")
	loc := locKey(ownerChat, 0)
	// The delivery record maps the bot's message to its entry; wait for it
	// before the next message, as a person reading the answer would.
	w.waitBranch(loc, []string{"user:one", "assistant:first answer"})
	w.say(ownerChat, owner, "two")
	w.waitMessage(ownerChat, "second answer")
	w.waitBranch(loc, []string{"user:one", "assistant:first answer", "user:two", "assistant:second answer"})

	three := w.say(ownerChat, owner, "three", w.replyingTo(first.ID))
	branched := w.waitMessage(ownerChat, "branched answer")
	if branched.ReplyTo != three.ID {
		t.Errorf("branched answer replies to %d, want %d", branched.ReplyTo, three.ID)
	}
	reqs := w.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model calls = %d, want 3", len(reqs))
	}
	want := []string{"user:one", "assistant:first answer", "user:three"}
	if got := requestTexts(reqs[2]); !slices.Equal(got, want) {
		t.Errorf("model request after the reply = %q, want %q", got, want)
	}
	w.waitBranch(loc, []string{"user:one", "assistant:first answer", "user:three", "assistant:branched answer"})

	// The old branch is still in the file, next to the new one.
	path, _ := w.head(loc)
	s := w.openSession(path)
	defer s.Close()
	var users []string
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeMessage && e.Message.Role == llm.RoleUser {
			users = append(users, e.Message.Text())
		}
	}
	if !slices.Equal(users, []string{"one", "two", "three"}) {
		t.Errorf("user messages in the file = %q", users)
	}
}

// A message sent while a tool runs steers the run: it reaches the model
// after the tool result, in the same run, and one reply answers both.
func TestSteeringWhileToolRuns(t *testing.T) {
	t.Parallel()
	g := newGate()
	w := newWorld(t, []faux.Turn{
		faux.ToolCalls(faux.Call("c1", "work", `{}`)),
		faux.Text("done, and X considered"),
	}, withTools(g.tool("work")))
	w.say(ownerChat, owner, "do the work")
	select {
	case <-g.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the tool did not start")
	}
	steer := w.say(ownerChat, owner, "also consider X")
	// The steering message is acknowledged while the tool still runs.
	w.waitFor("the steering message acknowledged", func() bool {
		for _, c := range w.srv.Calls("setMessageReaction") {
			if c.Params["message_id"] == itoa(steer.ID) {
				return true
			}
		}
		return false
	})
	if n := w.model.Calls(); n != 1 {
		t.Fatalf("model calls while the tool runs = %d, want 1", n)
	}
	close(g.release)

	w.waitMessage(ownerChat, "done, and X considered")
	reqs := w.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2 (steering joins the run)", len(reqs))
	}
	want := []string{"user:do the work", "toolResult:done c1", "user:also consider X"}
	if got := requestTexts(reqs[1]); !slices.Equal(got, want) {
		t.Errorf("second request = %q, want %q", got, want)
	}
	if g.runs.Load() != 1 {
		t.Errorf("tool ran %d times", g.runs.Load())
	}
	if got := w.withText(ownerChat, "done, and X considered"); len(got) != 1 {
		t.Errorf("%d messages carry the answer, want 1", len(got))
	}
	w.waitBranch(locKey(ownerChat, 0), []string{"user:do the work", "toolResult:done c1", "user:also consider X", "assistant:done, and X considered"})
}
