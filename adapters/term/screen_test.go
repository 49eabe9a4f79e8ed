package term

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pibot/pibot/adapters/term/termtest"
	"github.com/pibot/pibot/chat"
)

// TestLiveStreamRedrawsInPlace streams a reply to a live terminal: the
// screen ends up with the final reply once, however many updates (and
// rewrites of earlier lines, and wrapped lines) it took.
func TestLiveStreamRedrawsInPlace(t *testing.T) {
	ctx := t.Context()
	scr := termtest.NewScreen(20, 10)
	a, err := New(Config{In: strings.NewReader(""), Out: scr, Live: true, Size: func() (int, int) { return 20, 10 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "before"}); err != nil {
		t.Fatal(err)
	}
	st, err := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updates := []string{
		"Hel ▌",
		"Hello ▌",
		"Hello\n\n⏳ bash · ls ▌",
		"Hello\n\n✓ bash · ls\n\nA line long enough to wrap twice on twenty columns ▌",
		"Hello\n\n✓ bash · ls\n\nA line long enough to wrap twice on twenty columns, done ▌",
	}
	for _, u := range updates {
		if err := st.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	final := "Hello\n\n✓ bash · ls\n\nA line long enough to wrap twice on twenty columns, done."
	if _, err := st.Finish(ctx, chat.Out{Markdown: final}); err != nil {
		t.Fatal(err)
	}
	want := "before\nHello\n\n✓ bash · ls\n\nA line long enough t\no wrap twice on twen\nty columns, done."
	if got := scr.Text(); got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
	if x, y := scr.Cursor(); x != 0 || y != scr.Lines()-1 {
		t.Errorf("cursor at %d,%d: the reply does not end with a newline", x, y)
	}
}

// TestLiveEditInPlace edits the message that ends the output and an
// older one in place: no "↻ edited" note, nothing printed twice (issue 32).
// A message whose lines scrolled out of the cursor's reach is printed
// again, once, without a note.
func TestLiveEditInPlace(t *testing.T) {
	ctx := t.Context()
	scr := termtest.NewScreen(40, 10)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true, Size: func() (int, int) { return 40, 10 }})
	one, _ := a.Send(ctx, Conv(), chat.Out{Markdown: "one"})
	two, _ := a.Send(ctx, Conv(), chat.Out{Markdown: "two\nlines"})
	if err := a.Edit(ctx, two, chat.Out{Markdown: "two\nlines, edited"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, one, chat.Out{Markdown: "one, edited"}); err != nil {
		t.Fatal(err)
	}
	want := "one, edited\ntwo\nlines, edited"
	if got := scr.Text(); got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
	for i := range 10 {
		if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: fmt.Sprint("line ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Edit(ctx, one, chat.Out{Markdown: "one, out of reach"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, one, chat.Out{Markdown: "one, out of reach, again"}); err != nil {
		t.Fatal(err)
	}
	want += "\nline 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\none, out of reach, again"
	if got := scr.Text(); got != want {
		t.Errorf("screen:\n%s\nwant:\n%s", got, want)
	}
}

// TestLiveAbortTakesTheStreamOff: an aborted stream leaves nothing behind,
// so the message sent in its place is not shown twice.
func TestLiveAbortTakesTheStreamOff(t *testing.T) {
	ctx := t.Context()
	scr := termtest.NewScreen(40, 10)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true})
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	if err := st.Update(ctx, "partial\ntext"); err != nil {
		t.Fatal(err)
	}
	if err := st.Abort(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "partial\ntext, whole"}); err != nil {
		t.Fatal(err)
	}
	if got, want := scr.Text(), "partial\ntext, whole"; got != want {
		t.Errorf("screen %q, want %q", got, want)
	}
}

// TestPipeStreamPrintsFinalOnly: to a pipe, a streamed reply is printed
// once, its final text, with a newline.
func TestPipeStreamPrintsFinalOnly(t *testing.T) {
	ctx := t.Context()
	a, out := newTerm(t, strings.NewReader(""))
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	for _, u := range []string{"a ▌", "ab ▌", "abc ▌"} {
		if err := st.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "abc."}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "again"}); err == nil {
		t.Error("Finish twice succeeded")
	}
	if got := out.String(); got != "abc.\n" {
		t.Errorf("output %q", got)
	}
}

func TestDisplayWidth(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"abc", 3},
		{"\x1b[1mbold\x1b[22m", 4},
		{"日本", 4},
		{"a\tb", 9},
		{"✓ ok", 4},
	}
	for _, tt := range tests {
		if got := displayWidth(tt.s); got != tt.want {
			t.Errorf("displayWidth(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
	if got := screenRows("12345\n\n1234567890x", 5); got != 1+1+3 {
		t.Errorf("screenRows = %d", got)
	}
}

// TestLiveStatusLine: on a live terminal the status is one transient line
// below the conversation: replaced by the next status, taken away by the
// reply (which is still redrawn in place) and by "".
func TestLiveStatusLine(t *testing.T) {
	ctx := t.Context()
	scr := termtest.NewScreen(40, 10)
	a, _ := New(Config{In: strings.NewReader(""), Out: scr, Live: true})
	if a.Caps(Conv()).TypingRefresh <= 0 {
		t.Fatal("a live terminal has no status line")
	}
	step := func(name, want string) {
		t.Helper()
		if got := scr.Text(); got != want {
			t.Fatalf("%s: screen %q, want %q", name, got, want)
		}
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "before"}); err != nil {
		t.Fatal(err)
	}
	_ = a.SetStatus(ctx, Conv(), "thinking…")
	_ = a.SetStatus(ctx, Conv(), "thinking…") // a refresh: drawn once
	step("thinking", "before\n… thinking…")
	st, _ := a.OpenStream(ctx, Conv(), chat.StreamOptions{})
	_ = st.Update(ctx, "Hello")
	step("reply", "before\nHello")
	_ = a.SetStatus(ctx, Conv(), "running bash…")
	step("tool", "before\nHello\n… running bash…")
	_ = st.Update(ctx, "Hello world")
	step("reply again", "before\nHello world")
	_ = a.SetStatus(ctx, Conv(), "running ls…")
	_ = a.SetStatus(ctx, Conv(), "")
	step("cleared", "before\nHello world")
	if _, err := st.Finish(ctx, chat.Out{Markdown: "Hello world."}); err != nil {
		t.Fatal(err)
	}
	step("final", "before\nHello world.")
}
