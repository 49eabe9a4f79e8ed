package telegram

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/chat"
)

func TestSendEditTypingDraft(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	conv := dm(42)
	if c := h.a.Caps(conv); !c.NativeStream || c.MaxLen != 4000 || c.EditInterval != 1500*time.Millisecond || c.Dialect != chat.DialectTelegram || c.TypingRefresh != 4*time.Second {
		t.Errorf("DM caps = %+v", c)
	}
	if c := h.a.Caps(dm(-5)); c.NativeStream || c.EditInterval != 3*time.Second {
		t.Errorf("group caps = %+v", c)
	}

	ref, err := h.a.Send(ctx, conv, chat.Out{Markdown: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.a.Edit(ctx, ref, chat.Out{Markdown: "hello world"}); err != nil {
		t.Fatal(err)
	}
	if err := h.a.Edit(ctx, ref, chat.Out{Markdown: "hello world"}); err != nil {
		t.Fatalf("an edit that changes nothing: %v", err)
	}
	if got := h.srv.Calls("editMessageText"); len(got) != 2 || got[1].Code != 400 {
		t.Fatalf("edits = %+v; want the second answered 400 not modified", got)
	}
	msgs := h.srv.Messages(42)
	if len(msgs) != 1 || msgs[0].Text != "hello world" || msgs[0].ParseMode != "HTML" {
		t.Fatalf("messages = %+v", msgs)
	}
	missing := ref
	missing.ID = "999"
	if err := h.a.Edit(ctx, missing, chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("edit of a missing message: %v, want chat.ErrNotFound", err)
	}

	if err := h.a.SetStatus(ctx, conv, "typing"); err != nil {
		t.Fatal(err)
	}
	if c := h.srv.Calls("sendChatAction"); len(c) != 1 || c[0].Params["action"] != "typing" {
		t.Fatalf("chat actions = %+v", c)
	}

	s, err := h.a.OpenStream(ctx, conv, chat.StreamOptions{ReplyTo: &ref})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, "partial"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, "partial answer"); err != nil { // within 1 s: skipped
		t.Fatal(err)
	}
	final, err := s.Finish(ctx, chat.Out{Markdown: "partial answer, done"})
	if err != nil {
		t.Fatal(err)
	}
	if d := h.srv.Drafts(42); len(d) != 1 || d[0] != "partial" {
		t.Errorf("drafts = %q", d)
	}
	drafts := h.srv.Calls("sendMessageDraft")
	if id := drafts[0].Params["draft_id"]; id == "" || id == "0" {
		t.Errorf("draft id = %q", id)
	}
	msgs = h.srv.Messages(42)
	if len(msgs) != 2 || msgs[1].Text != "partial answer, done" || final.ID != "2" || msgs[1].ReplyTo != 1 {
		t.Fatalf("final message = %+v (ref %+v)", msgs, final)
	}
	if err := s.Update(ctx, "late"); err == nil {
		t.Error("update after Finish succeeded")
	}
	if _, err := h.a.OpenStream(ctx, dm(-5), chat.StreamOptions{}); err == nil {
		t.Error("a draft stream opened in a group")
	}
}

func TestRateLimitPausesTheBot(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	ref, err := h.a.Send(ctx, dm(42), chat.Out{Markdown: "one"})
	if err != nil {
		t.Fatal(err)
	}
	h.srv.Fail("editMessageText", 1, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 1})
	err = h.a.Edit(ctx, ref, chat.Out{Markdown: "two"})
	var rl *chat.RateLimitError
	if !errors.As(err, &rl) || rl.Scope != "bot" || rl.RetryAfter != time.Second {
		t.Fatalf("edit under 429: %v", err)
	}
	// While the pause lasts, live calls fail at once without a request…
	before := len(h.srv.Calls())
	if err := h.a.Edit(ctx, ref, chat.Out{Markdown: "three"}); !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > time.Second {
		t.Fatalf("edit during the pause: %v", err)
	}
	if err := h.a.SetStatus(ctx, dm(7), "typing"); !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("typing during the pause: %v", err)
	}
	if n := len(h.srv.Calls()); n != before {
		t.Fatalf("%d calls went out during the pause", n-before)
	}
	// …and sends, to any chat, wait it out.
	if _, err := h.a.Send(ctx, dm(43), chat.Out{Markdown: "final"}); err != nil {
		t.Fatal(err)
	}
	if v := h.srv.Violations(); len(v) > 0 {
		t.Fatalf("calls before retry_after expired: %v", v)
	}
	// A send that meets a 429 waits and retries.
	h.srv.Fail("sendMessage", 1, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 1})
	if _, err := h.a.Send(ctx, dm(43), chat.Out{Markdown: "again"}); err != nil {
		t.Fatal(err)
	}
	if v := h.srv.Violations(); len(v) > 0 {
		t.Fatalf("calls before retry_after expired: %v", v)
	}
	if len(h.srv.Messages(43)) != 2 {
		t.Fatalf("messages = %+v", h.srv.Messages(43))
	}
}

func TestBudgetKeepsUnderTheLimits(t *testing.T) {
	h := newHarness(t, nil) // fake and adapter both at the Bot FAQ numbers
	for i := range 5 {
		if _, err := h.a.Send(t.Context(), dm(42), chat.Out{Markdown: "n" + itoa(int64(i))}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range h.srv.Calls("sendMessage") {
		if c.Code != 200 {
			t.Fatalf("a send was answered %d", c.Code)
		}
	}
	if len(h.srv.Messages(42)) != 5 {
		t.Fatal("messages lost")
	}
}

func TestHTMLRejectedFallsBackToPlain(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("sendMessage", 1, telegramtest.Fault{Kind: telegramtest.Fault400, Description: "Bad Request: can't parse entities: unsupported start tag"})
	if _, err := h.a.Send(t.Context(), dm(42), chat.Out{Markdown: "**bold** text"}); err != nil {
		t.Fatal(err)
	}
	calls := h.srv.Calls("sendMessage")
	if len(calls) != 2 || calls[0].Params["parse_mode"] != "HTML" || calls[1].Params["parse_mode"] != "" {
		t.Fatalf("calls = %+v", calls)
	}
	if want := chat.Render("**bold** text", chat.DialectPlain); calls[1].Params["text"] != want {
		t.Fatalf("plain text = %q, want %q", calls[1].Params["text"], want)
	}
}

func TestSendRetriesServerErrors(t *testing.T) {
	tests := []struct {
		name  string
		fault telegramtest.Fault
	}{
		{"502", telegramtest.Fault{Kind: telegramtest.Fault5xx}},
		{"connection closed", telegramtest.Fault{Kind: telegramtest.FaultClose}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fast := telegramtest.Limits{PrivatePerSec: 100, PrivateBurst: 100, GlobalPerSec: 100, GlobalBurst: 100}
			h := newHarness(t, func(c *Config) { c.Pacing = Pacing{PrivatePerSec: 100, PrivateBurst: 100, GlobalPerSec: 100} }, telegramtest.WithLimits(fast))
			h.srv.Fail("sendMessage", 2, tt.fault)
			if _, err := h.a.Send(t.Context(), dm(42), chat.Out{Markdown: "final answer"}); err != nil {
				t.Fatal(err)
			}
			if n := len(h.srv.Calls("sendMessage")); n != 3 {
				t.Fatalf("%d attempts, want 3", n)
			}
			if m := h.srv.Messages(42); len(m) != 1 {
				t.Fatalf("messages = %+v", m)
			}
			h.srv.Fail("sendMessage", maxAttempts, tt.fault)
			if _, err := h.a.Send(t.Context(), dm(42), chat.Out{Markdown: "lost"}); err == nil {
				t.Fatal("send succeeded through endless faults")
			} else {
				assertNoToken(t, err)
			}
		})
	}
}

func TestButtonsAndCallbacks(t *testing.T) {
	h := newHarness(t, nil)
	in := h.run(t, nil)
	h.ready(t)
	ctx := t.Context()
	out := chat.Out{Markdown: "Run `rm -rf build`?", Buttons: [][]chat.Button{{{ID: "ap:1", Label: "Approve", Style: chat.StylePrimary}, {ID: "dn:1", Label: "Deny", Style: chat.StyleDanger}}}}
	ref, err := h.a.Send(ctx, dm(42), out)
	if err != nil {
		t.Fatal(err)
	}
	if b := h.srv.Messages(42)[0].Buttons; len(b) != 1 || len(b[0]) != 2 || b[0][0].CallbackData != "ap:1" || b[0][1].Style != "danger" {
		t.Fatalf("keyboard = %+v", b)
	}
	qid := h.srv.AddCallback(alice, 42, mustAtoi(t, ref.ID), "ap:1")
	got := next(t, in)
	if got.Kind != chat.KindAction || got.Action == nil || got.Action.Data != "ap:1" || got.Interaction == nil || got.Interaction.ID != qid || got.Action.Msg.ID != ref.ID || got.User.ID != "42" {
		t.Fatalf("action = %+v %+v", got, got.Action)
	}
	if _, err := h.a.Answer(ctx, *got.Interaction, chat.Answer{Toast: "Approved", Replace: &chat.Out{}}); err != nil {
		t.Fatal(err)
	}
	if a := h.srv.Calls("answerCallbackQuery"); len(a) != 1 || a[0].Params["callback_query_id"] != qid || a[0].Params["text"] != "Approved" {
		t.Fatalf("answers = %+v", a)
	}
	if m := h.srv.Messages(42)[0]; len(m.Buttons) != 0 || m.Text == "" {
		t.Fatalf("keyboard not removed: %+v", m)
	}
	if _, err := h.a.Answer(ctx, *got.Interaction, chat.Answer{Toast: "Denied", Replace: &chat.Out{Markdown: "Denied by alice"}}); err != nil {
		t.Fatal(err)
	}
	if m := h.srv.Messages(42)[0]; m.Text != "Denied by alice" {
		t.Fatalf("message not replaced: %+v", m)
	}
	long := chat.Out{Markdown: "x", Buttons: [][]chat.Button{{{ID: strings.Repeat("a", 65), Label: "too long"}}}}
	if _, err := h.a.Send(ctx, dm(42), long); err == nil || !strings.Contains(err.Error(), "64") {
		t.Fatalf("65-byte button id: %v", err)
	}
}

func TestFiles(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	data := bytes.Repeat([]byte("pibot"), 1000)
	id := h.srv.AddFile("notes.txt", data, 0)
	var buf bytes.Buffer
	if err := h.a.Download(ctx, chat.FileRef{ID: id, Name: "notes.txt"}, &buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatal("downloaded bytes differ")
	}
	big := h.srv.AddFile("big.bin", []byte("x"), 25<<20)
	for _, f := range []chat.FileRef{{ID: big, Name: "big.bin"}, {ID: "never", Name: "huge.iso", Size: 30 << 20}} {
		err := h.a.Download(ctx, f, &buf)
		if err == nil || !strings.Contains(err.Error(), "20 MB") {
			t.Fatalf("download of %s: %v, want the 20 MB limit named", f.Name, err)
		}
		assertNoToken(t, err)
	}

	png := []byte("\x89PNG fake")
	if _, err := h.a.Upload(ctx, dm(42), chat.OutFile{Name: "plot.png", MimeType: "image/png", Reader: bytes.NewReader(png), Size: int64(len(png)), Caption: "the plot"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.a.Upload(ctx, dm(42), chat.OutFile{Name: "report.pdf", MimeType: "application/pdf", Reader: strings.NewReader("%PDF"), Size: 4}, nil); err != nil {
		t.Fatal(err)
	}
	msgs := h.srv.Messages(42)
	if len(msgs) != 2 || msgs[0].Kind != "photo" || !bytes.Equal(msgs[0].File, png) || msgs[0].Text != "the plot" ||
		msgs[1].Kind != "document" || msgs[1].FileName != "report.pdf" || string(msgs[1].File) != "%PDF" {
		t.Fatalf("uploads = %+v", msgs)
	}
}

func TestCommandsReactDelete(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	cmds := []chat.CommandSpec{{Name: "new", Description: "Start a new session"}, {Name: "stop", Description: "Stop the run"}}
	if err := h.a.RegisterCommands(ctx, cmds); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Commands(); len(got) != 2 || got[1].Command != "stop" {
		t.Fatalf("commands = %+v", got)
	}
	if err := h.a.RegisterCommands(ctx, []chat.CommandSpec{{Name: "Bad-Name", Description: "x"}}); err == nil {
		t.Fatal("invalid command name accepted")
	}
	ref, err := h.a.Send(ctx, dm(42), chat.Out{Markdown: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.a.React(ctx, ref, "👀"); err != nil {
		t.Fatal(err)
	}
	if m := h.srv.Messages(42); len(m[0].Reactions) != 1 || m[0].Reactions[0] != "👀" {
		t.Fatalf("reactions = %+v", m[0].Reactions)
	}
	if err := h.a.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if m := h.srv.Messages(42); len(m) != 0 {
		t.Fatalf("message not deleted: %+v", m)
	}
	if err := h.a.Delete(ctx, ref); !errors.Is(err, chat.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestSendFollowsMigration(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Migrate(-5, -1005)
	ref, err := h.a.Send(t.Context(), dm(-5), chat.Out{Markdown: "still here"})
	if err != nil {
		t.Fatal(err)
	}
	if ref.Conv.Channel != "-1005" || len(h.srv.Messages(-1005)) != 1 {
		t.Fatalf("ref = %+v, messages = %+v", ref, h.srv.Messages(-1005))
	}
	if _, err := h.a.Send(t.Context(), dm(-5), chat.Out{Markdown: "again"}); err != nil {
		t.Fatal(err)
	}
	if n := len(h.srv.Messages(-1005)); n != 2 {
		t.Fatalf("second send not remapped: %d messages", n)
	}
}
