package adaptertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// pressed sends a question with buttons, runs the adapter, presses the
// second button and returns the question and the press.
func pressed(t *testing.T, tg Target) (chat.MsgRef, chat.Inbound) {
	t.Helper()
	if tg.Press == nil {
		t.Skip("the platform has no buttons to press")
	}
	ctx, cancel := context.WithCancel(ctxOf(t))
	got := make(chan chat.Inbound, 8)
	done := make(chan error, 1)
	go func() {
		done <- tg.Adapter.Run(ctx, func(_ context.Context, in chat.Inbound) error {
			got <- in
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	ref := send(t, tg, chat.Out{Markdown: "Run the command?", Buttons: [][]chat.Button{
		{{ID: "ap:yes", Label: "Allow", Style: chat.StylePrimary}, {ID: "ap:no", Label: "Deny", Style: chat.StyleDanger}},
	}})
	if err := tg.Press(ctx, ref, 1, "ap:no"); err != nil {
		t.Fatalf("press: %v", err)
	}
	var in chat.Inbound
	select {
	case in = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the press did not reach the sink")
	}
	if in.Kind != chat.KindAction || in.Action == nil || in.Action.Data != "ap:no" || in.Action.Msg.ID != ref.ID {
		t.Fatalf("press delivered as %+v (action %+v)", in, in.Action)
	}
	if in.Interaction == nil || in.Interaction.Platform != tg.Adapter.Platform() {
		t.Fatalf("press without an interaction handle: %+v", in.Interaction)
	}
	if in.User.ID == "" || in.DedupKey == "" {
		t.Errorf("press without a user or dedup key: %+v", in)
	}
	return ref, in
}

// responder returns the replica's Responder, skipping without one.
func responder(t *testing.T, tg Target) chat.Responder {
	t.Helper()
	a := tg.Replica
	if a == nil {
		a = tg.Adapter
	}
	r, ok := a.(chat.Responder)
	if !ok {
		t.Skip("not a chat.Responder")
	}
	return r
}

func testPressAndAnswer(t *testing.T, tg Target) {
	_, in := pressed(t, tg)
	r := responder(t, tg)
	ix := roundTrip(t, *in.Interaction)
	if _, err := r.Answer(ctxOf(t), ix, chat.Answer{Toast: "Denied", Replace: &chat.Out{Markdown: "Denied by you"}}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	sees(t, tg, "Denied by you")
	if tg.InPlace {
		seesNot(t, tg, "Run the command?")
	}
}

func testAnswerButtonsOnly(t *testing.T, tg Target) {
	_, in := pressed(t, tg)
	r := responder(t, tg)
	ix := roundTrip(t, *in.Interaction)
	if _, err := r.Answer(ctxOf(t), ix, chat.Answer{Replace: &chat.Out{}, Reply: &chat.Out{Markdown: "A reply to the press"}}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	sees(t, tg, "Run the command?", "A reply to the press")
}

// After the deadline an answer still replaces the message by an ordinary
// edit, or says ErrExpired.
func testAnswerLate(t *testing.T, tg Target) {
	_, in := pressed(t, tg)
	r := responder(t, tg)
	ix := roundTrip(t, *in.Interaction)
	ix.Deadline = time.Now().Add(-time.Minute)
	_, err := r.Answer(ctxOf(t), ix, chat.Answer{Toast: "Late toast", Replace: &chat.Out{Markdown: "Answered late"}})
	if errors.Is(err, chat.ErrExpired) {
		return
	}
	if err != nil {
		t.Fatalf("late answer: %v, want nil or chat.ErrExpired", err)
	}
	sees(t, tg, "Answered late")
}

func testEphemeral(t *testing.T, tg Target) {
	if tg.Adapter.Caps(tg.Conv).Ephemeral {
		t.Skip("real ephemeral messages: the conformance suite cannot see them")
	}
	send(t, tg, chat.Out{Markdown: "only for you, or for everyone here", Ephemeral: tg.User})
	sees(t, tg, "only for you, or for everyone here")
}

func testOpenThread(t *testing.T, tg Target) {
	o, ok := tg.Adapter.(chat.ThreadOpener)
	if !ok {
		t.Skip("not a chat.ThreadOpener")
	}
	ctx := ctxOf(t)
	parent := send(t, tg, chat.Out{Markdown: "a thread hangs off this"})
	conv, err := o.OpenThread(ctx, parent, "a thread")
	if err != nil {
		t.Fatalf("open thread: %v", err)
	}
	want := parent.Conv
	want.Thread = parent.ID
	if conv != want {
		t.Errorf("thread = %+v, want %+v (Thread = the parent's id)", conv, want)
	}
	again, err := o.OpenThread(ctx, parent, "a thread")
	if err != nil || again != conv {
		t.Errorf("opening it again: %+v, %v, want %+v", again, err, conv)
	}
	if _, err := tg.Adapter.Send(ctx, conv, chat.Out{Markdown: "in the thread"}); err != nil {
		t.Errorf("send in the thread: %v", err)
	}
}
