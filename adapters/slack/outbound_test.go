package slack

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/chat"
)

func chatOut(md string, buttons ...string) chat.Out {
	var row []chat.Button
	for _, b := range buttons {
		row = append(row, chat.Button{ID: b, Label: b})
	}
	out := chat.Out{Markdown: md}
	if row != nil {
		out.Buttons = [][]chat.Button{row}
	}
	return out
}

// A Retry-After applies to the method across the workspace: after a 429
// on chat.update in one channel, an update in another channel returns a
// RateLimitError without a call, and no call of the method is made inside
// the window; a final post waits it out and is delivered.
func TestRetryAfterIsWorkspaceWide(t *testing.T) {
	h := newHarness(t, "")
	ctx := t.Context()
	a1, err := h.a.Send(ctx, chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1"}, chatOut("one"))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := h.a.Send(ctx, chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C2"}, chatOut("two"))
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Fail("chat.update", 1, slacktest.Fault{Kind: slacktest.Fault429, RetryAfter: 1})
	if err := h.a.Edit(ctx, a1, chatOut("one, edited")); !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("edit answered 429: %v", err)
	}
	before := len(h.srv.CallsOf("chat.update"))
	err = h.a.Edit(ctx, a2, chatOut("two, edited"))
	var rl *chat.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("edit in another channel inside the window: %v", err)
	}
	if n := len(h.srv.CallsOf("chat.update")); n != before {
		t.Errorf("%d chat.update calls inside the window", n-before)
	}
	h.srv.Fail("chat.postMessage", 1, slacktest.Fault{Kind: slacktest.Fault429, RetryAfter: 1})
	start := time.Now()
	if _, err := h.a.Send(ctx, chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1"}, chatOut("final text")); err != nil {
		t.Fatalf("final post after a 429: %v", err)
	}
	if time.Since(start) < 900*time.Millisecond {
		t.Error("the final post did not wait out Retry-After")
	}
	if v := h.srv.Violations(); len(v) > 0 {
		t.Errorf("calls inside Retry-After windows: %v", v)
	}
}

// A channel stream names its recipient, appends only what is new, and
// stops with the buttons: the final text shows exactly once.
func TestStreamInChannel(t *testing.T) {
	h := newHarness(t, "")
	ctx := t.Context()
	parent, _ := h.srv.Post(slacktest.Say{Channel: "C1", User: "U1", Text: "<@UBOT> go"})
	conv := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1", Thread: parent}
	if _, err := h.a.OpenStream(ctx, conv, chat.StreamOptions{}); err == nil {
		t.Error("a channel stream without a recipient was opened")
	}
	st, err := h.a.OpenStream(ctx, conv, chat.StreamOptions{Recipient: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range []string{"Hello", "Hello, world.", "Hello, world.", "Hello, world.\n\nMore"} {
		if err := st.Update(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := st.Finish(ctx, chat.Out{Markdown: "Hello, world.\n\nMore text.", Buttons: [][]chat.Button{{{ID: "ap:1", Label: "Allow"}}}})
	if err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Thread("C1", parent)
	if len(msgs) != 2 {
		t.Fatalf("thread has %d messages", len(msgs))
	}
	m := msgs[1]
	if m.TS != ref.ID || m.Text != "Hello, world.\n\nMore text." || m.Stream == nil || !m.Stream.Stopped {
		t.Fatalf("streamed message %+v", m)
	}
	if m.Stream.RecipientUser != "U1" || m.Stream.RecipientTeam != "T0001" {
		t.Errorf("recipient %+v", m.Stream)
	}
	if len(m.Buttons) != 1 || m.Buttons[0] != "ap:1" {
		t.Errorf("buttons %v", m.Buttons)
	}
	if n := len(h.srv.CallsOf("chat.appendStream")); n != 2 {
		t.Errorf("%d appends, want 2 (nothing for an update that adds nothing)", n)
	}
	// An aborted stream is stopped, never left open.
	st2, _ := h.a.OpenStream(ctx, conv, chat.StreamOptions{Recipient: "U1"})
	if err := st2.Update(ctx, "partial"); err != nil {
		t.Fatal(err)
	}
	if err := st2.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range h.srv.Thread("C1", parent) {
		if m.Stream != nil && !m.Stream.Stopped {
			t.Errorf("stream %s left open", m.TS)
		}
	}
}

// Without the assistant scope the status is refused once (logged with the
// scope), and threads fall back to updates with tool lines.
func TestMissingAssistantScope(t *testing.T) {
	h := newHarness(t, "", slacktest.WithoutAssistant())
	conv := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1", Thread: "1700000000.000100"}
	if !h.a.Caps(conv).NativeStream {
		t.Fatal("a thread starts with native streams")
	}
	for range 3 {
		if err := h.a.SetStatus(t.Context(), conv, "running bash…"); err != nil {
			t.Fatal(err)
		}
	}
	if c := h.a.Caps(conv); c.NativeStream || c.AppendOnly {
		t.Errorf("caps after the refusal: %+v", c)
	}
	if n := len(h.srv.CallsOf("assistant.threads.setStatus")); n != 1 {
		t.Errorf("%d status calls, want 1", n)
	}
	if n := strings.Count(h.log.String(), "scope=assistant:write"); n != 1 {
		t.Errorf("the missing scope is logged %d times:\n%s", n, h.log.String())
	}
}

// The status goes to the thread, prefixed as Slack shows it ("is …").
func TestStatus(t *testing.T) {
	h := newHarness(t, "")
	conv := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1", Thread: "1700000000.000100"}
	for _, s := range []string{"running `go test`…", ""} {
		if err := h.a.SetStatus(t.Context(), conv, s); err != nil {
			t.Fatal(err)
		}
	}
	st := h.srv.Statuses()
	if len(st) != 2 || st[0].Status != "is running `go test`…" || st[1].Status != "" || st[0].ThreadTS != conv.Thread {
		t.Errorf("statuses %+v", st)
	}
}

// Answers: the toast goes to the presser only, through the response URL;
// after the deadline through chat.postEphemeral; the buttons are replaced.
func TestAnswer(t *testing.T) {
	h := newHarness(t, "")
	ctx := t.Context()
	conv := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1"}
	ref, err := h.a.Send(ctx, conv, chatOut("Run `ls`?", "ap:1", "ap:2"))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := h.srv.Press("C1", ref.ID, "U2", "ap:1")
	in, err := h.a.rd.interactionBody(payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Answer(ctx, *in.Interaction, chat.Answer{Toast: "Only the requester or an owner may answer."}); err != nil {
		t.Fatal(err)
	}
	e := h.srv.Ephemerals()
	if len(e) != 1 || e[0].User != "U2" || e[0].Via != "response_url" {
		t.Fatalf("ephemerals %+v", e)
	}
	if m := h.srv.Messages("C1"); len(m[0].Buttons) != 2 {
		t.Fatal("a refusal changed the buttons")
	}
	ix := *in.Interaction
	ix.Deadline = time.Now().Add(-time.Second)
	if _, err := h.a.Answer(ctx, ix, chat.Answer{Toast: "late", Replace: &chat.Out{Markdown: "Approved by <@U1>"}}); err != nil {
		t.Fatal(err)
	}
	e = h.srv.Ephemerals()
	if len(e) != 2 || e[1].Via != "chat.postEphemeral" {
		t.Errorf("late toast %+v", e)
	}
	if m := h.srv.Messages("C1"); len(m[0].Buttons) != 0 || !strings.Contains(m[0].Text, "Approved") {
		t.Errorf("replaced message %+v", m[0])
	}
}

// Files: the upload lands in the thread; a download is fetched with the
// bot token, refused above the cap, and the token goes to no other host.
func TestFiles(t *testing.T) {
	h := newHarness(t, "")
	ctx := t.Context()
	conv := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1", Thread: "1700000000.000100"}
	h.srv.Post(slacktest.Say{Channel: "C1", User: "U1", Text: "x"}) // some history
	if _, err := h.a.Upload(ctx, conv, chat.OutFile{Name: "out.txt", Reader: strings.NewReader("result"), Caption: "the **output**"}, nil); err != nil {
		t.Fatal(err)
	}
	if b, ok := h.srv.File("out.txt"); !ok || string(b) != "result" {
		t.Errorf("uploaded %q", b)
	}
	var shared *slacktest.Message
	for _, m := range h.srv.Messages("C1") {
		if len(m.Files) > 0 {
			shared = &m
		}
	}
	if shared == nil || shared.ThreadTS != conv.Thread {
		t.Fatalf("the file was not shared in the thread: %+v", shared)
	}
	f := h.srv.AddFile("in.txt", "text/plain", []byte("data from the user"))
	ref := chat.FileRef{ID: f["url_private_download"].(string), Name: "in.txt", Size: 18}
	var buf bytes.Buffer
	if err := h.a.Download(ctx, ref, &buf); err != nil || buf.String() != "data from the user" {
		t.Fatalf("download: %q, %v", buf.String(), err)
	}
	h.a.cfg.MaxDownload = 10
	if err := h.a.Download(ctx, ref, &buf); err == nil || !strings.Contains(err.Error(), "MiB") {
		t.Errorf("a file above the cap: %v", err)
	}
	ref.Size = 0 // the event did not say: refused while reading
	if err := h.a.Download(ctx, ref, &bytes.Buffer{}); err == nil {
		t.Error("a file above the cap of unknown size was taken")
	}
	h.a.cfg.MaxDownload = 1 << 20
	ref.ID = "https://evil.test/steal"
	if err := h.a.Download(ctx, ref, &bytes.Buffer{}); err == nil {
		t.Error("the token was sent to another host")
	}
}

// Tokens and the signing secret appear in no error and no log line.
func TestSecretsNeverShow(t *testing.T) {
	h := newHarness(t, "")
	h.srv.Fail("chat.postMessage", 1, slacktest.Fault{Kind: slacktest.FaultError, Error: "invalid_auth"})
	_, err := h.a.Send(t.Context(), dm(), chatOut("x"))
	if err == nil {
		t.Fatal("want an error")
	}
	h.srv.Fail("chat.postMessage", 4, slacktest.Fault{Kind: slacktest.Fault5xx})
	_, err2 := h.a.Send(t.Context(), dm(), chatOut("x"))
	for _, s := range []string{h.srv.BotToken, h.srv.AppToken, h.srv.SigningSecret} {
		if strings.Contains(err.Error(), s) || strings.Contains(err2.Error(), s) || strings.Contains(h.log.String(), s) {
			t.Errorf("a secret shows: %v / %v / %s", err, err2, h.log.String())
		}
	}
	if s := h.a.cfg.BotToken.String(); strings.Contains(s, "xoxb-1") {
		t.Errorf("the bot token formats as %q", s)
	}
}

// Calls that change one message (updates, appends, the stop) go out at
// most once a second for that message; another message is not held up.
func TestOneCallPerSecondPerMessage(t *testing.T) {
	h := newHarness(t, "")
	ctx := t.Context()
	c := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1"}
	m1, _ := h.a.Send(ctx, c, chatOut("one"))
	m2, _ := h.a.Send(ctx, c, chatOut("two"))
	for _, md := range []string{"one a", "one b"} {
		if err := h.a.Edit(ctx, m1, chatOut(md)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.a.Edit(ctx, m2, chatOut("two a")); err != nil {
		t.Fatal(err)
	}
	var at []time.Time
	for _, call := range h.srv.CallsOf("chat.update") {
		if call.Params["ts"] == m1.ID {
			at = append(at, call.Time)
		}
	}
	if len(at) != 2 || at[1].Sub(at[0]) < 950*time.Millisecond {
		t.Errorf("updates of one message at %v", at)
	}
}

// A visible answer to a slash command in a channel the bot is not in goes
// through the response URL, for everyone there.
func TestAnswerInChannelWithoutTheBot(t *testing.T) {
	h := newHarness(t, "")
	h.srv.Fail("chat.postMessage", 1, slacktest.Fault{Kind: slacktest.FaultError, Error: "not_in_channel"})
	in, err := h.a.rd.slashCommand(slackCommand(h.srv.SlashCommand("C9", "U1", "/pi", "new")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Answer(t.Context(), *in.Interaction, chat.Answer{Reply: &chat.Out{Markdown: "New session."}}); err != nil {
		t.Fatal(err)
	}
	if m := h.srv.Messages("C9"); len(m) != 1 || m[0].Text != "New session." {
		t.Errorf("messages %+v", m)
	}
}

// Model text in a stream never pings: Slack's special mentions are
// defused, also when one arrives split over two updates.
func TestStreamDefusesMentions(t *testing.T) {
	h := newHarness(t, "")
	ctx := t.Context()
	parent, _ := h.srv.Post(slacktest.Say{Channel: "C1", User: "U1", Text: "<@UBOT> go"})
	conv := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1", Thread: parent}
	st, err := h.a.OpenStream(ctx, conv, chat.StreamOptions{Recipient: "U1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range []string{"Hi <!chan", "Hi <!channel> and <@U", "Hi <!channel> and <@U42> a<b"} {
		if err := st.Update(ctx, md); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := st.Finish(ctx, chat.Out{Markdown: "Hi <!channel> and <@U42> a<b <!here>"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h.srv.Messages("C1") {
		if m.TS != ref.ID {
			continue
		}
		if strings.Contains(m.Text, "<!channel") || strings.Contains(m.Text, "<@U42") || strings.Contains(m.Text, "<!here") {
			t.Errorf("a mention went out live: %q", m.Text)
		}
		if strings.ReplaceAll(m.Text, "\u200b", "") != "Hi <!channel> and <@U42> a<b <!here>" {
			t.Errorf("text %q", m.Text)
		}
	}
}
