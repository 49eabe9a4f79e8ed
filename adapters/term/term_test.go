package term

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// Compile-time checks of the interfaces the adapter implements.
var (
	_ chat.Adapter   = (*Adapter)(nil)
	_ chat.Typer     = (*Adapter)(nil)
	_ chat.Responder = (*Adapter)(nil)
	_ chat.Streamer  = (*Adapter)(nil)
)

// buffer is an io.Writer safe for concurrent use.
type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// gateway answers synchronously: "hello" streams a reply and asks for
// approval; a button press replaces the question; other text is recorded.
type gateway struct {
	a   *Adapter
	ins []chat.Inbound
	err error // returned for the next inbound, then cleared
}

func (g *gateway) sink(ctx context.Context, in chat.Inbound) error {
	if err := g.err; err != nil {
		g.err = nil
		return err
	}
	g.ins = append(g.ins, in)
	switch {
	case in.Kind == chat.KindAction:
		_, err := g.a.Answer(ctx, *in.Interaction, chat.Answer{Toast: in.Action.Data, Replace: &chat.Out{Markdown: "Decided: " + in.Action.Data}})
		return err
	case in.Text == "hello":
		if err := g.a.SetStatus(ctx, in.Conv, "thinking"); err != nil {
			return err
		}
		st, err := g.a.OpenStream(ctx, in.Conv, chat.StreamOptions{})
		if err != nil {
			return err
		}
		for _, s := range []string{"Hel", "Hello", "Hello", "Hello world"} {
			if err := st.Update(ctx, s); err != nil {
				return err
			}
		}
		ref, err := st.Finish(ctx, chat.Out{Markdown: "Hello world!"})
		if err != nil {
			return err
		}
		if err := g.a.Edit(ctx, ref, chat.Out{Markdown: "Goodbye"}); err != nil {
			return err
		}
		_, err = g.a.Send(ctx, in.Conv, chat.Out{Markdown: "Run ls?", Buttons: [][]chat.Button{
			{{ID: "once", Label: "Allow once"}, {ID: "session", Label: "Allow for session"}},
			{{ID: "deny", Label: "Deny"}},
		}})
		return err
	}
	return nil
}

func newTerm(t *testing.T, in io.Reader) (*Adapter, *buffer) {
	t.Helper()
	out := &buffer{}
	a, err := New(Config{In: in, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	return a, out
}

func TestConversation(t *testing.T) {
	a, out := newTerm(t, strings.NewReader("hello\n7\n3\n2\n/tree  deep\nline one\\\nline two\n"))
	g := &gateway{a: a}
	if err := a.Run(t.Context(), g.sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := "… thinking\n" +
		"Hello world!\n" + // streamed to a pipe: only the final text
		"Goodbye\n" + // an edit: the new text, no "↻ edited" note

		"Run ls?\n" +
		"[1] Allow once  [2] Allow for session  [3] Deny\n" +
		"no button 7: type a number from 1 to 3\n" +
		"Decided: deny\n" +
		"✓ deny\n"
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
	if len(g.ins) != 5 {
		t.Fatalf("%d inbound events: %+v", len(g.ins), g.ins)
	}
	conv := chat.ConvRef{Platform: "term", Channel: "local", DM: true}
	hello := g.ins[0]
	if hello.Kind != chat.KindMessage || hello.Conv != conv || hello.User.ID != "local" || hello.Msg.ID == "" || hello.DedupKey == "" {
		t.Errorf("message inbound %+v", hello)
	}
	press := g.ins[1]
	if press.Kind != chat.KindAction || press.Action.Data != "deny" || press.Action.Msg.ID == "" || press.Action.Msg != press.Msg {
		t.Errorf("button inbound %+v", press)
	}
	// "2" after the press: the buttons are gone, so it is a message.
	if two := g.ins[2]; two.Kind != chat.KindMessage || two.Text != "2" {
		t.Errorf("number without buttons: %+v", two)
	}
	if cmd := g.ins[3].Command; cmd == nil || cmd.Name != "tree" || cmd.Args != "deep" {
		t.Errorf("command %+v", cmd)
	}
	if g.ins[4].Text != "line one\nline two" {
		t.Errorf("continued line: %q", g.ins[4].Text)
	}
	ids := map[string]bool{}
	for _, in := range g.ins {
		if ids[in.DedupKey] {
			t.Errorf("duplicate dedup key %q", in.DedupKey)
		}
		ids[in.DedupKey] = true
	}
}

func TestRefusedInput(t *testing.T) {
	a, out := newTerm(t, strings.NewReader("first\nsecond\n"))
	g := &gateway{a: a, err: errors.New("disk full")}
	if err := a.Run(t.Context(), g.sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := out.String(); got != "! not delivered: disk full — send it again\n" {
		t.Errorf("output %q", got)
	}
	if len(g.ins) != 1 || g.ins[0].Text != "second" {
		t.Errorf("inbound %+v", g.ins)
	}
}

func TestRefusedPressCanBeRepeated(t *testing.T) {
	a, out := newTerm(t, strings.NewReader("1\n1\n"))
	if _, err := a.Send(t.Context(), Conv(), chat.Out{Markdown: "ok?", Buttons: [][]chat.Button{{{ID: "y", Label: "Yes"}}}}); err != nil {
		t.Fatal(err)
	}
	g := &gateway{a: a, err: errors.New("busy")}
	if err := a.Run(t.Context(), g.sink); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(g.ins) != 1 || g.ins[0].Kind != chat.KindAction || g.ins[0].Action.Data != "y" {
		t.Errorf("inbound %+v", g.ins)
	}
	if !strings.Contains(out.String(), `"Yes" not delivered: busy`) {
		t.Errorf("output %q", out.String())
	}
}

// TestPipe drives Run through a pipe: every line is delivered before the
// next is read, and Run returns once the writer closes.
func TestPipe(t *testing.T) {
	pr, pw := io.Pipe()
	a, out := newTerm(t, pr)
	got := make(chan chat.Inbound)
	sink := func(ctx context.Context, in chat.Inbound) error {
		got <- in
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(t.Context(), sink) }()

	go func() {
		_, _ = io.WriteString(pw, "hello\n")
	}()
	if in := <-got; in.Text != "hello" {
		t.Fatalf("got %q", in.Text)
	}
	ref, err := a.Send(t.Context(), Conv(), chat.Out{Markdown: "Approve?", Buttons: [][]chat.Button{{{ID: "a", Label: "Allow"}, {ID: "d", Label: "Deny"}}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(pw, "1\n")
		pw.Close()
	}()
	if in := <-got; in.Kind != chat.KindAction || in.Action.Data != "a" || in.Action.Msg != ref {
		t.Fatalf("press %+v", in)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := "Approve?\n[1] Allow  [2] Deny\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	a, _ := newTerm(t, pr)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, func(context.Context, chat.Inbound) error { return nil }) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestEdit(t *testing.T) {
	ctx := t.Context()
	a, out := newTerm(t, strings.NewReader(""))
	ref, err := a.Send(ctx, Conv(), chat.Out{Markdown: "one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(ctx, Conv(), chat.Out{Markdown: "two"}); err != nil {
		t.Fatal(err)
	}
	// Not a terminal: the new text is printed, once, without a note.
	if err := a.Edit(ctx, ref, chat.Out{Markdown: "one more"}); err != nil {
		t.Fatal(err)
	}
	if want := "one\ntwo\none more\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	tests := []struct {
		name string
		ref  chat.MsgRef
	}{
		{"unknown id", chat.MsgRef{Conv: Conv(), ID: "nope"}},
		{"other conversation", chat.MsgRef{Conv: chat.ConvRef{Platform: "web", Channel: "local"}, ID: ref.ID}},
	}
	for _, tt := range tests {
		if err := a.Edit(ctx, tt.ref, chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("%s: Edit = %v, want ErrNotFound", tt.name, err)
		}
	}
	if _, err := a.Send(ctx, chat.ConvRef{Platform: "term", Channel: "other"}, chat.Out{Markdown: "x"}); err == nil {
		t.Error("Send to another conversation succeeded")
	}
}

func TestColorAndCaps(t *testing.T) {
	out := &buffer{}
	a, err := New(Config{In: strings.NewReader(""), Out: out, Color: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Caps(Conv()); c.Dialect != chat.DialectANSI || c.MaxLen != MaxLen || c.TypingRefresh != 0 {
		t.Errorf("Caps %+v", c)
	}
	if _, err := a.Send(t.Context(), Conv(), chat.Out{Markdown: "**bold**"}); err != nil {
		t.Fatal(err)
	}
	if want := chat.Render("**bold**", chat.DialectANSI) + "\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if err := a.SetStatus(t.Context(), Conv(), "working"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ansiDim+"… working"+ansiReset) {
		t.Errorf("status not dimmed: %q", out.String())
	}
	plain, _ := newTerm(t, strings.NewReader(""))
	if plain.Caps(Conv()).Dialect != chat.DialectPlain {
		t.Error("plain terminal does not use the plain dialect")
	}
	if _, err := New(Config{Out: out}); err == nil {
		t.Error("New without In succeeded")
	}
}
