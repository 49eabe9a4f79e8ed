package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/chat"
)

// Compile-time checks of the interfaces the adapter implements.
var (
	_ chat.Adapter   = (*Adapter)(nil)
	_ chat.Typer     = (*Adapter)(nil)
	_ chat.Responder = (*Adapter)(nil)
)

func newAdapter(t *testing.T, cfg Config) *Adapter {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run starts a.Run with sink and stops it when the test ends.
func run(t *testing.T, a *Adapter, sink chat.Sink) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := a.Run(ctx, sink); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	// Wait until Run has installed the sink.
	for a.feeder.running() == nil {
		waitABit()
	}
}

// runStoppable starts a.Run with a sink that records, waits until it has
// installed the sink, and returns stop, which ends Run and returns its
// error.
func runStoppable(t *testing.T, a *Adapter) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, (&recorder{}).sink) }()
	for a.feeder.running() == nil {
		waitABit()
	}
	return func() error {
		cancel()
		return <-done
	}
}

func conv(id, thread string) chat.ConvRef {
	return chat.ConvRef{Platform: Platform, Channel: id, Thread: thread, DM: true}
}

func TestRequireToken(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", false},
		{"127.1.2.3:80", false},
		{"localhost:8080", false},
		{"LOCALHOST:8080", false},
		{"[::1]:8080", false},
		{":8080", true},
		{"0.0.0.0:8080", true},
		{"192.168.1.2:8080", true},
		{"[::]:8080", true},
		{"example.com:80", true},
		{"127.0.0.1", false},
	}
	for _, tt := range tests {
		if got := RequireToken(tt.addr); got != tt.want {
			t.Errorf("RequireToken(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

func TestCaps(t *testing.T) {
	a := newAdapter(t, Config{})
	c := a.Caps(conv("c1", ""))
	if c.Dialect != chat.DialectMarkdown || c.MaxLen != 20000 || c.EditInterval != EditInterval || c.TypingRefresh != StatusRefresh || !c.StatusLine {
		t.Errorf("Caps = %+v", c)
	}
	if a.Platform() != "web" {
		t.Errorf("Platform = %q", a.Platform())
	}
}

func TestSendEdit(t *testing.T) {
	ctx := t.Context()
	a := newAdapter(t, Config{})
	c := conv("c1", "")
	r1, err := a.Send(ctx, c, chat.Out{Markdown: "one"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.Send(ctx, c, chat.Out{Markdown: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.ID == r2.ID || r1.Conv != c {
		t.Fatalf("refs %+v %+v", r1, r2)
	}
	if err := a.Edit(ctx, r1, chat.Out{Markdown: "one!", Buttons: [][]chat.Button{{{ID: "x", Label: "X"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(ctx, r1, chat.Out{Markdown: "one!", Buttons: [][]chat.Button{{{ID: "x", Label: "X"}}}}); err != nil {
		t.Fatalf("no-op edit: %v", err)
	}
	a.store.mu.Lock()
	evs := a.store.convs["c1"].since(0)
	a.store.mu.Unlock()
	if len(evs) != 3 { // two creations, one edit (the no-op edit adds nothing)
		t.Errorf("%d events, want 3", len(evs))
	}
	if !strings.Contains(string(evs[0].data), `"text":"one!"`) || !strings.Contains(string(evs[2].data), `"text":"one!"`) {
		t.Errorf("events do not carry the current text: %s / %s", evs[0].data, evs[2].data)
	}

	notFound := []struct {
		name string
		ref  chat.MsgRef
	}{
		{"unknown id", chat.MsgRef{Conv: c, ID: "nope"}},
		{"unknown conversation", chat.MsgRef{Conv: conv("c2", ""), ID: r1.ID}},
		{"other thread", chat.MsgRef{Conv: conv("c1", "t1"), ID: r1.ID}},
		{"other platform", chat.MsgRef{Conv: chat.ConvRef{Platform: "term", Channel: "c1"}, ID: r1.ID}},
	}
	for _, tt := range notFound {
		if err := a.Edit(ctx, tt.ref, chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrNotFound) {
			t.Errorf("%s: Edit = %v, want ErrNotFound", tt.name, err)
		}
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	ctx := t.Context()
	a := newAdapter(t, Config{})
	tests := []struct {
		name string
		conv chat.ConvRef
		out  chat.Out
	}{
		{"other platform", chat.ConvRef{Platform: "slack", Channel: "c1"}, chat.Out{Markdown: "x"}},
		{"bad channel", conv("a b", ""), chat.Out{Markdown: "x"}},
		{"too long", conv("c1", ""), chat.Out{Markdown: strings.Repeat("é", MaxLen+1)}},
		{"long button id", conv("c1", ""), chat.Out{Markdown: "x", Buttons: [][]chat.Button{{{ID: strings.Repeat("b", 65)}}}}},
	}
	for _, tt := range tests {
		if _, err := a.Send(ctx, tt.conv, tt.out); err == nil {
			t.Errorf("%s: Send succeeded", tt.name)
		}
	}
	if _, err := a.Send(ctx, conv("c1", ""), chat.Out{Markdown: strings.Repeat("é", MaxLen)}); err != nil {
		t.Errorf("Send at the limit: %v", err)
	}
}

func TestLogIsBounded(t *testing.T) {
	ctx := t.Context()
	a := newAdapter(t, Config{})
	c := conv("c1", "")
	var refs []chat.MsgRef
	for i := range maxMessages + 10 {
		r, err := a.Send(ctx, c, chat.Out{Markdown: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Edit(ctx, r, chat.Out{Markdown: fmt.Sprint(i, "!")}); err != nil {
			t.Fatal(err)
		}
		if err := a.SetStatus(ctx, conv("c1", fmt.Sprint("t", i%3)), "working"); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, r)
	}
	a.store.mu.Lock()
	l := a.store.convs["c1"]
	nMsgs, nEntries := len(l.msgs), len(l.entries)
	a.store.mu.Unlock()
	if nMsgs > maxMessages || nEntries > maxEntries {
		t.Errorf("log holds %d messages, %d entries", nMsgs, nEntries)
	}
	if err := a.Edit(ctx, refs[0], chat.Out{Markdown: "late"}); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("Edit of a forgotten message = %v, want ErrNotFound", err)
	}
	if err := a.Edit(ctx, refs[len(refs)-1], chat.Out{Markdown: "late"}); err != nil {
		t.Errorf("Edit of a recent message = %v", err)
	}
}

func TestConversationsAreBounded(t *testing.T) {
	ctx := t.Context()
	a := newAdapter(t, Config{})
	for i := range maxConvs + 5 {
		if _, err := a.Send(ctx, conv(fmt.Sprint("c", i), ""), chat.Out{Markdown: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	a.store.mu.Lock()
	n := len(a.store.convs)
	a.store.mu.Unlock()
	if n > maxConvs {
		t.Errorf("%d conversations kept, want at most %d", n, maxConvs)
	}
}

func TestAnswer(t *testing.T) {
	ctx := t.Context()
	a := newAdapter(t, Config{})
	c := conv("c1", "")
	r, err := a.Send(ctx, c, chat.Out{Markdown: "allow?", Buttons: [][]chat.Button{{{ID: "y", Label: "Yes"}}}})
	if err != nil {
		t.Fatal(err)
	}
	ix := chat.Interaction{Platform: Platform, ID: "p1", Conv: c, Msg: r, User: UserID}
	if _, err := a.Answer(ctx, ix, chat.Answer{Toast: "ok", Replace: &chat.Out{Markdown: "allowed"}}); err != nil {
		t.Fatal(err)
	}
	a.store.mu.Lock()
	m := a.store.convs["c1"].msgs[r.ID]
	text, buttons := m.Text, m.Buttons
	a.store.mu.Unlock()
	if text != "allowed" || buttons != nil {
		t.Errorf("after Answer: %q %v", text, buttons)
	}
	if _, err := a.Answer(ctx, chat.Interaction{Platform: "telegram", Conv: c}, chat.Answer{Toast: "x"}); err == nil {
		t.Error("Answer of another platform's interaction succeeded")
	}
}

func TestRunTwice(t *testing.T) {
	a := newAdapter(t, Config{})
	run(t, a, func(context.Context, chat.Inbound) error { return nil })
	if err := a.Run(t.Context(), func(context.Context, chat.Inbound) error { return nil }); err == nil {
		t.Error("second Run succeeded")
	}
}
