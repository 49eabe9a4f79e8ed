package term

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/pibot/pibot/adapters/term/termtest"
	"github.com/pibot/pibot/chat"
)

// liveChat is a live terminal with the line editor, read from a pipe the
// test types into, on a screen 60×20; the lines and presses the user sends
// arrive on in, and the test answers them as the gateway would.
type liveChat struct {
	a    *Adapter
	scr  *termtest.Screen
	keys *io.PipeWriter
	in   chan chat.Inbound
	done chan error
}

func newLiveChat(t *testing.T) *liveChat {
	t.Helper()
	pr, pw := io.Pipe()
	c := &liveChat{scr: termtest.NewScreen(60, 20), keys: pw, in: make(chan chat.Inbound), done: make(chan error, 1)}
	a, err := New(Config{In: pr, Out: c.scr, Live: true, Edit: true, Size: func() (int, int) { return 60, 20 }})
	if err != nil {
		t.Fatal(err)
	}
	c.a = a
	go func() {
		c.done <- a.Run(context.WithoutCancel(t.Context()), func(ctx context.Context, in chat.Inbound) error {
			c.in <- in
			return nil
		})
	}()
	t.Cleanup(func() {
		pw.Close()
		if err := <-c.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

// send types line and Enter, and returns what the adapter delivered.
func (c *liveChat) send(t *testing.T, line string) chat.Inbound {
	t.Helper()
	if _, err := io.WriteString(c.keys, line+"\r"); err != nil {
		t.Fatal(err)
	}
	return <-c.in
}

// sees fails unless the screen shows exactly want (the prompt on the last
// line).
func (c *liveChat) sees(t *testing.T, step, want string) {
	t.Helper()
	if got := c.scr.Text(); got != want {
		t.Fatalf("%s: screen\n%s\nwant\n%s", step, got, want)
	}
}

// TestLiveApprovalRedrawsInPlace replays issue 32's terminal approval as
// the gateway drives it: the reply so far is finished (the cut), the card
// with its buttons is sent, the reply goes on in a new stream that says it
// waits; "1" presses Allow once, the toast comes, the card is replaced by
// its outcome and the reply goes on. Each part of the reply shows once, no
// "waiting for approval" stays behind, and no "↻ edited" is printed
// (before the fix the reply was printed three times).
func TestLiveApprovalRedrawsInPlace(t *testing.T) {
	tests := []struct {
		name, key, toast, outcome, result string
	}{
		{"allowed", "1", "Allowed.", "✅ bash allowed once by you.", "It printed hi."},
		{"denied", "3", "Denied.", "❌ bash denied by you.", "It did not run."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			c := newLiveChat(t)
			if in := c.send(t, "run it"); in.Text != "run it" {
				t.Fatalf("line %+v", in)
			}
			_ = c.a.SetStatus(ctx, Conv(), "thinking…")
			first, _ := c.a.OpenStream(ctx, Conv(), chat.StreamOptions{})
			for _, u := range []string{"Let ▌", "Let me ▌", "Let me check. ▌"} {
				if err := first.Update(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := first.Finish(ctx, chat.Out{Markdown: "Let me check."}); err != nil {
				t.Fatal(err)
			}
			card, err := c.a.Send(ctx, Conv(), chat.Out{Markdown: "🔐 Approve bash?\n\necho hi", Buttons: [][]chat.Button{{
				{ID: "once", Label: "Allow once"}, {ID: "session", Label: "Allow for this session"}, {ID: "deny", Label: "Deny"},
			}}})
			if err != nil {
				t.Fatal(err)
			}
			rest, _ := c.a.OpenStream(ctx, Conv(), chat.StreamOptions{})
			if err := rest.Update(ctx, "⏳ bash · echo hi\n\n_waiting for approval of bash_"); err != nil {
				t.Fatal(err)
			}
			c.sees(t, "waiting", "› run it\nLet me check.\n🔐 Approve bash?\n\necho hi\n"+
				"[1] Allow once  [2] Allow for this session  [3] Deny\n⏳ bash · echo hi\n\nwaiting for approval of bash\n›")

			press := c.send(t, tt.key)
			if press.Kind != chat.KindAction || press.Action.Msg != card {
				t.Fatalf("press %+v", press)
			}
			if _, err := c.a.Answer(ctx, *press.Interaction, chat.Answer{Toast: tt.toast}); err != nil {
				t.Fatal(err)
			}
			if err := c.a.Edit(ctx, card, chat.Out{Markdown: tt.outcome}); err != nil {
				t.Fatal(err)
			}
			c.sees(t, "decided", "› run it\nLet me check.\n"+tt.outcome+"\n› "+tt.key+"\n⏳ bash · echo hi\n\nwaiting for approval of bash\n›")
			for _, u := range []string{"✓ bash · echo hi\n\nIt ▌", "✓ bash · echo hi\n\n" + tt.result + " ▌"} {
				if err := rest.Update(ctx, u); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rest.Finish(ctx, chat.Out{Markdown: "✓ bash · echo hi\n\n" + tt.result}); err != nil {
				t.Fatal(err)
			}
			c.sees(t, "final", "› run it\nLet me check.\n"+tt.outcome+"\n› "+tt.key+"\n✓ bash · echo hi\n\n"+tt.result+"\n›")
		})
	}
}

// TestLiveCommandMidStream: a command sent while a reply streams is
// answered above the reply, which goes on below; no partial copy of the
// reply stays behind (issue 32).
func TestLiveCommandMidStream(t *testing.T) {
	ctx := t.Context()
	c := newLiveChat(t)
	c.send(t, "tell me")
	st, _ := c.a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	if err := st.Update(ctx, "First part, ▌"); err != nil {
		t.Fatal(err)
	}
	if in := c.send(t, "/status"); in.Command == nil || in.Command.Name != "status" {
		t.Fatalf("command %+v", in)
	}
	if _, err := c.a.Send(ctx, Conv(), chat.Out{Markdown: "Session 01ab\nModel m/m"}); err != nil {
		t.Fatal(err)
	}
	c.sees(t, "answered", "› tell me\n› /status\nSession 01ab\nModel m/m\nFirst part, ▌\n›")
	if err := st.Update(ctx, "First part, second part ▌"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "First part, second part."}); err != nil {
		t.Fatal(err)
	}
	c.sees(t, "final", "› tell me\n› /status\nSession 01ab\nModel m/m\nFirst part, second part.\n›")
	// Finished: what follows goes below it.
	c.send(t, "/status")
	if _, err := c.a.Send(ctx, Conv(), chat.Out{Markdown: "Session 01ab"}); err != nil {
		t.Fatal(err)
	}
	c.sees(t, "after", "› tell me\n› /status\nSession 01ab\nModel m/m\nFirst part, second part.\n› /status\nSession 01ab\n›")
}

// TestLiveToastIsTransient: on a live terminal a toast shows on the
// transient line, stays through an empty status and goes with the next
// output.
func TestLiveToastIsTransient(t *testing.T) {
	ctx := t.Context()
	c := newLiveChat(t)
	ref, _ := c.a.Send(ctx, Conv(), chat.Out{Markdown: "ok?", Buttons: [][]chat.Button{{{ID: "y", Label: "Yes"}}}})
	press := c.send(t, "1")
	if _, err := c.a.Answer(ctx, *press.Interaction, chat.Answer{Toast: "Already decided."}); err != nil {
		t.Fatal(err)
	}
	_ = c.a.SetStatus(ctx, Conv(), "")
	c.sees(t, "toast", "ok?\n[1] Yes\n› 1\n✓ Already decided.\n›")
	if err := c.a.Edit(ctx, ref, chat.Out{Markdown: "ok."}); err != nil {
		t.Fatal(err)
	}
	c.sees(t, "edited", "ok.\n› 1\n›")
}

// TestPipeApprovalPrintsEachTextOnce: to a pipe the same approval prints
// each finished text once: the card with its buttons, its outcome (no
// "↻ edited" note) and the final reply.
func TestPipeApprovalPrintsEachTextOnce(t *testing.T) {
	ctx := t.Context()
	a, out := newTerm(t, strings.NewReader(""))
	first, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	_ = first.Update(ctx, "Let me ▌")
	_, _ = first.Finish(ctx, chat.Out{Markdown: "Let me check."})
	card, _ := a.Send(ctx, Conv(), chat.Out{Markdown: "Approve bash?", Buttons: [][]chat.Button{{{ID: "once", Label: "Allow once"}, {ID: "deny", Label: "Deny"}}}})
	rest, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	_ = rest.Update(ctx, "⏳ bash\n\n_waiting for approval of bash_")
	if err := a.Edit(ctx, card, chat.Out{Markdown: "Allowed once."}); err != nil {
		t.Fatal(err)
	}
	_ = rest.Update(ctx, "✓ bash\n\nIt ▌")
	if _, err := rest.Finish(ctx, chat.Out{Markdown: "✓ bash\n\nIt printed hi."}); err != nil {
		t.Fatal(err)
	}
	want := "Let me check.\nApprove bash?\n[1] Allow once  [2] Deny\nAllowed once.\n✓ bash\n\nIt printed hi.\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// TestLiveTallReply: a streaming reply taller than the screen cannot be
// redrawn below a new message (its first lines are out of reach), so the
// message goes below it, and the reply still grows in place: nothing is
// printed twice.
func TestLiveTallReply(t *testing.T) {
	ctx := t.Context()
	scr := termtest.NewScreen(40, 5)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true, Size: func() (int, int) { return 40, 5 }})
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	long := "1\n2\n3\n4\n5\n6"
	if err := st.Update(ctx, long); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "note"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, long+"\n7"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: long + "\n7."}); err != nil {
		t.Fatal(err)
	}
	if got, want := scr.Text(), long+"\n7.\nnote"; got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
}
