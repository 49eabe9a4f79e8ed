package telegram

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// A press received by one replica is answered by another, which never ran
// and holds only the serialised handle.
func TestAnswerFromAnotherReplica(t *testing.T) {
	h := newHarness(t, nil)
	in := h.run(t, nil)
	h.ready(t)
	ctx := t.Context()
	ref, err := h.a.Send(ctx, dm(42), chat.Out{Markdown: "Allow?", Buttons: [][]chat.Button{{{ID: "ap:1", Label: "Allow"}}}})
	if err != nil {
		t.Fatal(err)
	}
	qid := h.srv.AddCallback(alice, 42, mustAtoi(t, ref.ID), "ap:1")
	got := next(t, in)
	if got.Interaction == nil || got.Interaction.Deadline.IsZero() {
		t.Fatalf("press without an interaction deadline: %+v", got.Interaction)
	}
	raw, err := json.Marshal(got.Interaction)
	if err != nil {
		t.Fatal(err)
	}
	var ix chat.Interaction
	if err := json.Unmarshal(raw, &ix); err != nil {
		t.Fatal(err)
	}
	other, err := New(Config{Token: secret.New(testToken), APIURL: h.srv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Answer(ctx, ix, chat.Answer{Toast: "Allowed", Replace: &chat.Out{Markdown: "Allowed by alice"}}); err != nil {
		t.Fatal(err)
	}
	if a := h.srv.Calls("answerCallbackQuery"); len(a) != 1 || a[0].Params["callback_query_id"] != qid || a[0].Params["text"] != "Allowed" {
		t.Fatalf("answers = %+v", a)
	}
	if m := h.srv.Messages(42)[0]; m.Text != "Allowed by alice" || len(m.Buttons) != 0 {
		t.Fatalf("message = %+v", m)
	}
}

// After the callback deadline the toast cannot be a callback answer any
// more: it becomes a normal message, and the keyboard is still replaced.
func TestAnswerAfterDeadline(t *testing.T) {
	h := newHarness(t, nil)
	ctx := t.Context()
	ref, err := h.a.Send(ctx, dm(42), chat.Out{Markdown: "Allow?", Buttons: [][]chat.Button{{{ID: "ap:1", Label: "Allow"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ix := chat.Interaction{Platform: "telegram", ID: "q1", Conv: dm(42), Msg: ref, User: "42", Deadline: time.Now().Add(-time.Second)}
	if _, err := h.a.Answer(ctx, ix, chat.Answer{Toast: "Too late, but allowed", Replace: &chat.Out{}}); err != nil {
		t.Fatal(err)
	}
	if a := h.srv.Calls("answerCallbackQuery"); len(a) != 0 {
		t.Errorf("answered an expired query: %+v", a)
	}
	msgs := h.srv.Messages(42)
	if len(msgs) != 2 || msgs[1].Text != "Too late, but allowed" || len(msgs[0].Buttons) != 0 {
		t.Fatalf("messages = %+v", msgs)
	}
	// Telegram refusing a query as too old has the same fallback.
	h.srv.Fail("answerCallbackQuery", 1, telegramtest.Fault{Kind: telegramtest.Fault400, Description: "Bad Request: query is too old and response timeout expired or query ID is invalid"})
	ix.ID, ix.Deadline = "q2", time.Now().Add(time.Minute)
	if _, err := h.a.Answer(ctx, ix, chat.Answer{Toast: "Refused as too old"}); err != nil {
		t.Fatal(err)
	}
	if msgs := h.srv.Messages(42); len(msgs) != 3 || msgs[2].Text != "Refused as too old" {
		t.Fatalf("messages = %+v", msgs)
	}
	if _, err := h.a.Answer(ctx, chat.Interaction{Platform: "telegram"}, chat.Answer{}); err == nil {
		t.Error("answer without a query id succeeded")
	}
}
