package term

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/term/termtest"
	"github.com/pibot/pibot/chat"
)

// TestLineEditing types keys into a raw-mode terminal: cursor movement,
// deletion, word erase and the history walked with ↑ and ↓.
func TestLineEditing(t *testing.T) {
	keys := "helo\x1b[Dl\r" + // left arrow, insert: "hello"
		"second\r" +
		"\x1b[A\x1b[A\r" + // two up: "hello"
		"abc\x7f\x7fx\r" + // backspace twice: "ax"
		"one two\x17three\r" + // Ctrl-W: "one three"
		"draft\x1b[A\x1b[B!\r" + // up then down restores the draft
		"x\x01>\x05<\r" + // Ctrl-A, Ctrl-E
		"\x1b[3~\x04" // delete on an empty line, then Ctrl-D ends the input
	scr := termtest.NewScreen(40, 20)
	a, err := New(Config{In: strings.NewReader(keys), Out: scr, Edit: true, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	sink := func(ctx context.Context, in chat.Inbound) error {
		got = append(got, in.Text)
		return nil
	}
	if err := a.Run(t.Context(), sink); err != nil {
		t.Fatal(err)
	}
	want := []string{"hello", "second", "hello", "ax", "one three", "draft!", ">x<"}
	if !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if !strings.HasPrefix(scr.Text(), "› hello\n› second\n› hello\n") {
		t.Errorf("screen:\n%s", scr.Text())
	}
}

// TestOutputWhileTyping: a message arriving while the user types is
// printed above the prompt, and the half-typed line is drawn again below.
func TestOutputWhileTyping(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	scr := termtest.NewScreen(40, 20)
	a, _ := New(Config{In: pr, Out: scr, Edit: true, Live: true})
	lines := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- a.Run(t.Context(), func(ctx context.Context, in chat.Inbound) error {
			lines <- in.Text
			return nil
		})
	}()
	if _, err := io.WriteString(pw, "par"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return scr.Text() == "› par" })
	if _, err := a.Send(t.Context(), Conv(), chat.Out{Markdown: "bot says"}); err != nil {
		t.Fatal(err)
	}
	if got := scr.Text(); got != "bot says\n› par" {
		t.Errorf("screen while typing %q", got)
	}
	// The status line sits above the prompt and goes with the next output.
	_ = a.SetStatus(t.Context(), Conv(), "thinking…")
	if got := scr.Text(); got != "bot says\n… thinking…\n› par" {
		t.Errorf("screen with a status %q", got)
	}
	_ = a.SetStatus(t.Context(), Conv(), "")
	if got := scr.Text(); got != "bot says\n› par" {
		t.Errorf("screen after the status %q", got)
	}
	if _, err := io.WriteString(pw, "tial\r"); err != nil {
		t.Fatal(err)
	}
	if l := <-lines; l != "partial" {
		t.Errorf("line %q", l)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := scr.Text(); got != "bot says\n› partial" {
		t.Errorf("screen %q", got)
	}
}

// waitFor polls cond (an event from another goroutine, not a timing
// assertion) for up to ten seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met")
}

// TestTypingWhileAReplyStreams: a line sent while a reply streams is shown
// above the reply, which goes on being redrawn in place: nothing of it is
// printed twice.
func TestTypingWhileAReplyStreams(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	scr := termtest.NewScreen(40, 20)
	a, _ := New(Config{In: pr, Out: scr, Edit: true, Live: true})
	lines := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- a.Run(t.Context(), func(ctx context.Context, in chat.Inbound) error {
			lines <- in.Text
			return nil
		})
	}()
	ctx := t.Context()
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	_ = st.Update(ctx, "Hello")
	waitFor(t, func() bool { return scr.Text() == "Hello\n›" })
	if _, err := io.WriteString(pw, "also this\r"); err != nil {
		t.Fatal(err)
	}
	if l := <-lines; l != "also this" {
		t.Fatalf("line %q", l)
	}
	if got := scr.Text(); got != "› also this\nHello\n›" {
		t.Errorf("after the line: %q", got)
	}
	_ = st.Update(ctx, "Hello world")
	if _, err := st.Finish(ctx, chat.Out{Markdown: "Hello world."}); err != nil {
		t.Fatal(err)
	}
	if got := scr.Text(); got != "› also this\nHello world.\n›" {
		t.Errorf("after the reply: %q", got)
	}
	// Finished: the next line goes below it.
	if _, err := io.WriteString(pw, "next\r"); err != nil {
		t.Fatal(err)
	}
	<-lines
	if got := scr.Text(); got != "› also this\nHello world.\n› next\n›" {
		t.Errorf("after the next line: %q", got)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
