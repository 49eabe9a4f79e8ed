package discord

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/chat"
)

func TestInboundPlaces(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	bot := h.srv.Bot.ID

	// A mention in a channel: the main line, mention stripped.
	m := h.srv.PostUser(chanID, alice, "<@"+bot+"> what is 2+2?", "")
	h.srv.DispatchMessage(m, true)
	in := next(t, got)
	if in.Conv != guildConv() || !in.Mentioned || in.Text != "what is 2+2?" || in.Bound || in.DedupKey != "discord:"+m.ID {
		t.Fatalf("mention: %+v", in)
	}

	// A thread the bot opened on it: later messages there need no
	// mention, and the conversation is the parent with Thread = the
	// message's id.
	conv, err := h.a.OpenThread(ctxT(t), in.Msg, "what is 2+2?")
	if err != nil {
		t.Fatal(err)
	}
	m2 := h.srv.PostUser(m.ID, alice, "and 3+3?", "")
	h.srv.DispatchMessage(m2, false)
	in = next(t, got)
	if in.Conv != conv || conv.Thread != m.ID || conv.Channel != chanID || !in.Bound || in.Mentioned {
		t.Fatalf("thread message: %+v (thread %+v)", in, conv)
	}

	// A thread someone else started on someone else's message: not bound.
	other := h.srv.PostUser(chanID, bob, "hello all", "")
	h.srv.AddThread(other.ID, chanID, bob.ID)
	m3 := h.srv.PostUser(other.ID, bob, "chat among us", "")
	h.srv.DispatchMessage(m3, false)
	in = next(t, got)
	if in.Bound || in.Conv.Thread != other.ID {
		t.Fatalf("foreign thread: %+v", in)
	}

	// A DM reply to an earlier message: a branch from it.
	first, err := h.a.Send(ctxT(t), dmConv(), chat.Out{Markdown: "an answer"})
	if err != nil {
		t.Fatal(err)
	}
	m4 := h.srv.PostUser(dmID, alice, "about that", first.ID)
	h.srv.DispatchMessage(m4, false)
	in = next(t, got)
	if !in.Conv.DM || in.ReplyTo == nil || in.ReplyTo.ID != first.ID || !in.ReplyToBot || !in.Mentioned {
		t.Fatalf("DM reply: %+v", in)
	}

	// A text command in the thread.
	m5 := h.srv.PostUser(m.ID, alice, "/stop", "")
	h.srv.DispatchMessage(m5, false)
	in = next(t, got)
	if in.Command == nil || in.Command.Name != "stop" || in.Interaction != nil {
		t.Fatalf("text command: %+v", in)
	}

	// The bot's own messages never come back.
	own := h.srv.PostUser(chanID, h.srv.Bot, "mine", "")
	h.srv.DispatchMessage(own, false)
	nothing(t, got, 300*time.Millisecond)
}

// A MESSAGE_CREATE replayed around a resume, even with a new sequence
// number, reaches the sink once; the session is resumed, not identified
// again.
func TestResumeDedupe(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	m := h.srv.PostUser(dmID, alice, "only once", "")
	h.srv.DispatchMessage(m, false)
	if in := next(t, got); in.Text != "only once" {
		t.Fatalf("got %+v", in)
	}
	h.srv.ReplayOnResume(1)
	h.srv.Drop()
	missed := h.srv.PostUser(dmID, alice, "while away", "")
	h.srv.DispatchMessage(missed, false)
	select {
	case <-h.srv.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("no resume")
	}
	if in := next(t, got); in.Text != "while away" {
		t.Fatalf("after resume: %+v", in)
	}
	nothing(t, got, 500*time.Millisecond)
	if r, i := h.srv.Resumes(), h.srv.Identifies(); r != 1 || i != 1 {
		t.Errorf("resumes %d, identifies %d; want 1 and 1", r, i)
	}
}

func TestIntents(t *testing.T) {
	h := newHarness(t, nil)
	h.run(t)
	if got, want := h.srv.Intents(), 1<<9|1<<12|1<<15; got != want {
		t.Errorf("intents %d, want %d (GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT)", got, want)
	}
}

// A refused privileged intent stops the adapter with an error naming the
// switch in the developer portal.
func TestMessageContentRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.RefuseMessageContent()
	err := runUntilStopped(t, h)
	if err == nil || !strings.Contains(err.Error(), "MESSAGE CONTENT INTENT") || !strings.Contains(err.Error(), "developer portal") {
		t.Fatalf("Run: %v", err)
	}
	if h.a.Health() == nil {
		t.Error("Health is nil after the refusal")
	}
	if n := h.srv.Identifies(); n != 1 {
		t.Errorf("%d identifies, want 1", n)
	}
}

// runUntilStopped runs the adapter and returns Run's error; Run must end
// on its own.
func runUntilStopped(t *testing.T, h *harness) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctxT(t), func(ctx2 ctxType, in chat.Inbound) error { return nil }) }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop")
		return nil
	}
}

// Bad tokens: REST 401 or gateway 4004. The adapter stops with one clear
// log line, a failed Health, few calls, and never the token in its output.
func TestRefusedToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(h *harness)
	}{
		{"rest401", func(h *harness) {
			h.a = h.adapter(t, func(c *Config) { c.Token = secretOf("wrong-token-value") })
		}},
		{"gateway4004", func(h *harness) { h.srv.RefuseIdentify() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			tc.prep(h)
			start := time.Now()
			err := runUntilStopped(t, h)
			if err == nil || !strings.Contains(err.Error(), "invalid token") {
				t.Fatalf("Run: %v", err)
			}
			if h.a.Health() == nil {
				t.Error("Health is nil")
			}
			time.Sleep(500 * time.Millisecond)
			calls, ids := len(h.srv.Calls()), h.srv.Identifies()
			if calls > 20 || ids > 5 {
				t.Errorf("%d REST calls and %d identifies after a refused token", calls, ids)
			}
			// Nothing goes to Discord any more.
			if _, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "x"}); err == nil {
				t.Error("send after the refusal succeeded")
			}
			if again := len(h.srv.Calls()); again != calls {
				t.Errorf("%d calls after the refusal", again-calls)
			}
			logs := h.logs.String()
			if n := strings.Count(logs, "adapter stopped"); n != 1 {
				t.Errorf("%d 'adapter stopped' lines in:\n%s", n, logs)
			}
			if strings.Contains(logs, "wrong-token-value") || strings.Contains(logs, testToken) {
				t.Error("the token is in the logs")
			}
			if time.Since(start) > 20*time.Second {
				t.Error("stopping took too long")
			}
		})
	}
}

func TestInteractionCommandDeferred(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	id := h.srv.Command(chanID, alice, "pi", discordtest.Option{Name: "stop", Type: 1})
	in := next(t, got)
	if in.Command == nil || in.Command.Name != "stop" || in.Interaction == nil || in.Interaction.ID != id || in.User.ID != alice.ID {
		t.Fatalf("command: %+v", in)
	}
	waitFor(t, func() bool { return len(h.srv.Callbacks()) == 1 })
	cb := h.srv.Callbacks()[0]
	if cb.Type != discordtest.CallbackDeferred || strings.Contains(string(cb.Data), `"flags":64`) {
		t.Fatalf("first answer: type %d data %s, want a visible deferred answer (type 5)", cb.Type, cb.Data)
	}
	ref, err := h.a.Answer(ctxT(t), *in.Interaction, chat.Answer{Reply: &chat.Out{Markdown: "Stopped."}})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := h.srv.Message(ref.ID); !ok || m.Content != "Stopped." || m.Ephemeral != "" {
		t.Fatalf("answer message %+v", m)
	}

	// /pi status concerns only the user: deferred ephemerally.
	h.srv.Command(chanID, alice, "pi", discordtest.Option{Name: "status", Type: 1})
	in = next(t, got)
	waitFor(t, func() bool { return len(h.srv.Callbacks()) == 2 })
	if cb := h.srv.Callbacks()[1]; !strings.Contains(string(cb.Data), `"flags":64`) {
		t.Fatalf("status deferred as %s", cb.Data)
	}
	ref, err = h.a.Answer(ctxT(t), *in.Interaction, chat.Answer{Reply: &chat.Out{Markdown: "idle", Ephemeral: alice.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(h.srv.Transcript(chanID, bob.ID), "idle") || !strings.Contains(h.srv.Transcript(chanID, alice.ID), "idle") {
		t.Errorf("the ephemeral answer: bob sees %q, alice %q", h.srv.Transcript(chanID, bob.ID), h.srv.Transcript(chanID, alice.ID))
	}
	// An ephemeral answer stays editable through its token (a second
	// later: edits of one message are a second apart).
	time.Sleep(editInterval)
	if err := h.a.Edit(ctxT(t), ref, chat.Out{Markdown: "idle, edited"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.srv.Transcript(chanID, alice.ID), "idle, edited") {
		t.Error("edit through the token did not land")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A forum post is a thread of the forum; a thread someone started on one
// of the bot's messages is bound and branches from that message.
func TestInboundForumAndBotStarter(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	post := h.srv.NewID()
	h.srv.AddThread(post, forumID, alice.ID)
	m := h.srv.PostUser(post, alice, "<@"+h.srv.Bot.ID+"> help with this post", "")
	h.srv.DispatchMessage(m, true)
	in := next(t, got)
	if in.Conv.Channel != forumID || in.Conv.Thread != post || !in.Mentioned || in.Bound {
		t.Fatalf("forum post: %+v", in)
	}

	ref, err := h.a.Send(ctxT(t), guildConv(), chat.Out{Markdown: "a bot message in the channel"})
	if err != nil {
		t.Fatal(err)
	}
	h.srv.AddThread(ref.ID, chanID, bob.ID)
	m2 := h.srv.PostUser(ref.ID, bob, "about your message", "")
	h.srv.DispatchMessage(m2, false)
	in = next(t, got)
	if !in.Bound || in.ReplyTo == nil || in.ReplyTo.ID != ref.ID || in.ReplyTo.Conv != guildConv() || !in.ReplyToBot {
		t.Fatalf("thread on the bot's message: %+v (reply %+v)", in, in.ReplyTo)
	}
}

// After an invalid session the adapter identifies again, each time after a
// longer wait.
func TestIdentifyBackoff(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.IdentifyBackoff = 200 * time.Millisecond })
	h.run(t)
	for range 3 {
		n := h.srv.Identifies()
		h.srv.InvalidateSession()
		waitFor(t, func() bool { return h.srv.Identifies() > n })
	}
	at := h.srv.IdentifyTimes()
	if len(at) != 4 {
		t.Fatalf("%d identifies", len(at))
	}
	for i := 2; i < len(at); i++ {
		want := 200 * time.Millisecond << (i - 2)
		if gap := at[i].Sub(at[i-1]); gap < want {
			t.Errorf("identify %d came %s after the previous one, want at least %s", i, gap, want)
		}
	}
	if h.srv.Resumes() != 0 {
		t.Errorf("%d resumes of an invalid session", h.srv.Resumes())
	}
}

func TestStripMention(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"<@42> hi", "hi"},
		{"hi <@42> there", "hi there"},
		{"<@!42> fix:\n```\ncode  here\n```", "fix:\n```\ncode  here\n```"},
		{"<@43> not me", "<@43> not me"},
	} {
		if got := stripMention(tc.in, "42"); got != tc.want {
			t.Errorf("stripMention(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCleanRemovesTokens(t *testing.T) {
	a := &caller{token: secretOf("bot-token-xyz")}
	err := errors.New(`Post "https://discord.com/api/v9/webhooks/123/itok-secret/messages/@original": bot-token-xyz dial tcp; ` +
		`Post "https://discord.com/api/v9/interactions/5/itok-other/callback": refused`)
	got := a.clean(err)
	for _, s := range []string{"bot-token-xyz", "itok-secret", "itok-other"} {
		if strings.Contains(got, s) {
			t.Errorf("%q left in %q", s, got)
		}
	}
}

// A guild message carries its author's roles (agent bindings match them);
// a DM none.
func TestInboundRoles(t *testing.T) {
	h := newHarness(t, nil)
	got := h.run(t)
	m := h.srv.PostMember(chanID, alice, []string{"555", "777"}, "<@"+h.srv.Bot.ID+"> deploy")
	h.srv.DispatchMessage(m, true)
	in := next(t, got)
	if strings.Join(in.User.Roles, ",") != "555,777" {
		t.Fatalf("roles: %+v", in.User)
	}
	d := h.srv.PostUser(dmID, alice, "hi", "")
	h.srv.DispatchMessage(d, false)
	if in = next(t, got); in.User.Roles != nil {
		t.Fatalf("a DM has roles: %+v", in.User)
	}
}
