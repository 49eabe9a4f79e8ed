// Package adaptertest is a conformance suite for chat.Adapter
// implementations: Run drives an adapter against the platform behind it (a
// fake Bot API, an httptest server, pipes, an in-memory fake) and checks the
// behaviour the gateway relies on, whatever the platform.
//
// Every test is skipped only when the adapter lacks the ability: an
// optional interface it does not implement (chat.Deleter, chat.Reactor,
// chat.Typer, chat.Streamer, chat.Responder, chat.ThreadOpener), a Caps
// field that says so (NativeStream, Ephemeral), or a platform fault the
// Target cannot inject (no rate limits to provoke), or an event the
// platform does not have (a group mention in the terminal). Outbound calls
// are made while Run is not active, as on a replica that does not poll the
// platform, unless a test needs inbound events.
//
// The inbound cases (a DM, a mention and a plain group message, a reply
// in a thread, a command, a refused event delivered again) check what the
// gateway relies on: the conversation ref, the dedupe key (the same on a
// redelivery), the mention and the bound flags, the user and the text with
// the mention stripped.
package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// Target is one adapter under test and a view of the platform behind it.
type Target struct {
	// Adapter is the adapter under test. Run is not active.
	Adapter chat.Adapter
	// Conv is a one-to-one conversation the bot may post in.
	Conv chat.ConvRef
	// User is the id of the user of Conv.
	User string
	// Transcript returns what the user now sees in conv, as plain text:
	// the visible messages, oldest first, in any separator. Deleted
	// messages are gone from it.
	Transcript func(conv chat.ConvRef) string
	// InPlace is true when an edit replaces the message on screen, so the
	// old text disappears (false for the terminal on a pipe, which
	// prints anew).
	InPlace bool
	// Press makes the user press the button id, the n-th button (from 0,
	// across rows) of the message ref, and the platform deliver the press
	// to the running adapter. nil if the platform has no buttons.
	Press func(ctx context.Context, ref chat.MsgRef, n int, id string) error
	// Replica is another adapter for the same platform, as another
	// process would hold: it never ran and shares no memory with Adapter.
	// nil when the platform lives in the adapter's process (web,
	// terminal, in-memory fakes); Adapter itself is used then.
	Replica chat.Adapter
	// RateLimit makes the platform answer the next edit with a 429 that
	// asks to retry after d. nil if the platform has no rate limits.
	RateLimit func(d time.Duration)
	// Deliver makes the User do ev on the platform, which delivers it to
	// the running Adapter (Deliver waits until the adapter is connected),
	// and says where it happened. An error wrapping errors.ErrUnsupported
	// means the platform has no such event (no groups, no threads); the
	// case is skipped. nil: no inbound cases.
	Deliver func(ctx context.Context, ev Event) (Delivered, error)
}

// NewTarget returns a fresh target for one test; it registers its own
// cleanup with t.
type NewTarget func(t *testing.T) Target

// Run runs the suite.
func Run(t *testing.T, newTarget NewTarget) {
	tests := []struct {
		name string
		fn   func(t *testing.T, tg Target)
	}{
		{"SendEdit", testSendEdit},
		{"EditMissingIsNotFound", testEditMissing},
		{"OutboundAfterRunEnded", testAfterRun},
		{"Delete", testDelete},
		{"React", testReact},
		{"Typing", testTyping},
		{"NativeStream", testStream},
		{"AppendOnlyStream", testAppendOnly},
		{"ButtonIDLimit", testButtonLimit},
		{"PressAndAnswer", testPressAndAnswer},
		{"AnswerKeepsTextReplacingButtons", testAnswerButtonsOnly},
		{"AnswerAfterDeadline", testAnswerLate},
		{"SplitLimits", testSplit},
		{"RateLimitError", testRateLimit},
		{"EphemeralFallback", testEphemeral},
		{"OpenThread", testOpenThread},
		{"InboundDM", testInboundDM},
		{"InboundMention", testInboundMention},
		{"InboundThreadReply", testInboundThreadReply},
		{"InboundCommand", testInboundCommand},
		{"InboundRedelivery", testInboundRedelivery},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTarget(t)
			tc.fn(t, tg)
		})
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func send(t *testing.T, tg Target, m chat.Out) chat.MsgRef {
	t.Helper()
	ref, err := tg.Adapter.Send(ctxOf(t), tg.Conv, m)
	if err != nil {
		t.Fatalf("send %q: %v", m.Markdown, err)
	}
	return ref
}

func sees(t *testing.T, tg Target, want ...string) {
	t.Helper()
	got := tg.Transcript(tg.Conv)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("the user does not see %q in:\n%s", w, got)
		}
	}
}

func seesNot(t *testing.T, tg Target, unwanted string) {
	t.Helper()
	if got := tg.Transcript(tg.Conv); strings.Contains(got, unwanted) {
		t.Errorf("the user still sees %q in:\n%s", unwanted, got)
	}
}

// roundTrip passes v through JSON, as a durable inbox or another replica
// would.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	var out T
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("unmarshal %T: %v", v, err)
	}
	return out
}

// missing is a reference to a message that does not exist: numeric, so
// platforms with numeric ids accept its form.
func missing(tg Target) chat.MsgRef {
	return chat.MsgRef{Conv: tg.Conv, ID: "987654321"}
}

func testSendEdit(t *testing.T, tg Target) {
	ctx := ctxOf(t)
	ref := send(t, tg, chat.Out{Markdown: "first version of the message"})
	if ref.ID == "" || ref.Conv.Platform != tg.Adapter.Platform() {
		t.Fatalf("send returned %+v", ref)
	}
	sees(t, tg, "first version of the message")
	// The reference survives serialisation (Handle included): the gateway
	// keeps it in files and other replicas use it.
	ref = roundTrip(t, ref)
	if err := tg.Adapter.Edit(ctx, ref, chat.Out{Markdown: "second version of the message"}); err != nil {
		t.Fatalf("edit: %v", err)
	}
	sees(t, tg, "second version of the message")
	if tg.InPlace {
		seesNot(t, tg, "first version")
	}
	if err := tg.Adapter.Edit(ctx, ref, chat.Out{Markdown: "second version of the message"}); err != nil {
		t.Errorf("an edit that changes nothing: %v, want nil", err)
	}
}

func testEditMissing(t *testing.T, tg Target) {
	err := tg.Adapter.Edit(ctxOf(t), missing(tg), chat.Out{Markdown: "x"})
	if !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("edit of a missing message: %v, want chat.ErrNotFound", err)
	}
}

// Outbound calls do not depend on Run: before it (every other test) and
// after it returned.
func testAfterRun(t *testing.T, tg Target) {
	ctx, cancel := context.WithCancel(ctxOf(t))
	done := make(chan error, 1)
	go func() { done <- tg.Adapter.Run(ctx, func(context.Context, chat.Inbound) error { return nil }) }()
	ref := send(t, tg, chat.Out{Markdown: "sent while running"})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	after := send(t, tg, chat.Out{Markdown: "sent after Run ended"})
	if err := tg.Adapter.Edit(ctxOf(t), ref, chat.Out{Markdown: "edited after Run ended"}); err != nil {
		t.Fatalf("edit after Run ended: %v", err)
	}
	if after.ID == "" {
		t.Errorf("send after Run ended returned %+v", after)
	}
	sees(t, tg, "sent after Run ended", "edited after Run ended")
}

func testDelete(t *testing.T, tg Target) {
	d, ok := tg.Adapter.(chat.Deleter)
	if !ok {
		t.Skip("not a chat.Deleter")
	}
	ctx := ctxOf(t)
	ref := send(t, tg, chat.Out{Markdown: "soon deleted"})
	if err := d.Delete(ctx, ref); err != nil {
		t.Fatalf("delete: %v", err)
	}
	seesNot(t, tg, "soon deleted")
	if err := tg.Adapter.Edit(ctx, ref, chat.Out{Markdown: "x"}); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("edit of a deleted message: %v, want chat.ErrNotFound", err)
	}
	if err := d.Delete(ctx, missing(tg)); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("delete of a missing message: %v, want chat.ErrNotFound", err)
	}
}

func testReact(t *testing.T, tg Target) {
	r, ok := tg.Adapter.(chat.Reactor)
	if !ok {
		t.Skip("not a chat.Reactor")
	}
	ctx := ctxOf(t)
	ref := send(t, tg, chat.Out{Markdown: "react to me"})
	if err := r.React(ctx, ref, "👍"); err != nil {
		t.Fatalf("react: %v", err)
	}
	if err := r.React(ctx, missing(tg), "👍"); !errors.Is(err, chat.ErrNotFound) {
		t.Errorf("reaction to a missing message: %v, want chat.ErrNotFound", err)
	}
}

func testTyping(t *testing.T, tg Target) {
	ty, ok := tg.Adapter.(chat.Typer)
	if !ok {
		t.Skip("not a chat.Typer")
	}
	ctx := ctxOf(t)
	for _, status := range []string{"thinking…", ""} {
		if err := ty.SetStatus(ctx, tg.Conv, status); err != nil {
			t.Errorf("SetStatus(%q): %v", status, err)
		}
	}
}

func streamer(t *testing.T, tg Target) chat.Streamer {
	t.Helper()
	s, ok := tg.Adapter.(chat.Streamer)
	if !ok || !tg.Adapter.Caps(tg.Conv).NativeStream {
		t.Skip("no native stream in this conversation")
	}
	return s
}

func testStream(t *testing.T, tg Target) {
	s := streamer(t, tg)
	ctx := ctxOf(t)
	st, err := s.OpenStream(ctx, tg.Conv, chat.StreamOptions{Recipient: tg.User})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	for _, md := range []string{"Streaming", "Streaming the reply"} {
		if err := st.Update(ctx, md); err != nil {
			t.Fatalf("update %q: %v", md, err)
		}
	}
	ref, err := st.Finish(ctx, chat.Out{Markdown: "Streaming the reply, finished."})
	if err != nil {
		t.Fatalf("finish: %v", err)
	}
	if ref.ID == "" {
		t.Errorf("finish returned %+v", ref)
	}
	sees(t, tg, "Streaming the reply, finished.")
	if err := st.Update(ctx, "Streaming the reply, finished. More"); err == nil {
		t.Error("update after finish succeeded")
	}
	ab, err := s.OpenStream(ctx, tg.Conv, chat.StreamOptions{ReplyTo: &ref, Recipient: tg.User})
	if err != nil {
		t.Fatalf("open a second stream: %v", err)
	}
	if err := ab.Abort(ctx); err != nil {
		t.Errorf("abort: %v", err)
	}
}

func testAppendOnly(t *testing.T, tg Target) {
	s := streamer(t, tg)
	if !tg.Adapter.Caps(tg.Conv).AppendOnly {
		t.Skip("the native stream can rewrite its text")
	}
	ctx := ctxOf(t)
	st, err := s.OpenStream(ctx, tg.Conv, chat.StreamOptions{Recipient: tg.User})
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if err := st.Update(ctx, "Done: one."); err != nil {
		t.Fatalf("update: %v", err)
	}
	if err := st.Update(ctx, "Rewritten"); !errors.Is(err, chat.ErrNotAppend) {
		t.Errorf("update that rewrites: %v, want chat.ErrNotAppend", err)
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "Other"}); !errors.Is(err, chat.ErrNotAppend) {
		t.Errorf("finish that rewrites: %v, want chat.ErrNotAppend", err)
	}
	if _, err := st.Finish(ctx, chat.Out{Markdown: "Done: one. Two."}); err != nil {
		t.Fatalf("finish that appends: %v", err)
	}
	sees(t, tg, "Done: one. Two.")
}

func buttonLimit(tg Target) int {
	if n := tg.Adapter.Caps(tg.Conv).MaxButtonID; n > 0 {
		return n
	}
	return chat.MaxButtonID
}

func testButtonLimit(t *testing.T, tg Target) {
	ctx := ctxOf(t)
	n := buttonLimit(tg)
	ok := chat.Out{Markdown: "choose", Buttons: [][]chat.Button{{{ID: strings.Repeat("a", n), Label: "Longest id"}}}}
	if _, err := tg.Adapter.Send(ctx, tg.Conv, ok); err != nil {
		t.Errorf("a %d-byte button id: %v", n, err)
	}
	long := chat.Out{Markdown: "choose", Buttons: [][]chat.Button{{{ID: strings.Repeat("a", n+1), Label: "Too long"}}}}
	if _, err := tg.Adapter.Send(ctx, tg.Conv, long); err == nil {
		t.Errorf("a %d-byte button id was accepted", n+1)
	}
}

// A message as long as Caps.MaxLen arrives whole; a longer one is either
// refused or delivered without losing a word (split), never cut.
func testSplit(t *testing.T, tg Target) {
	ctx := ctxOf(t)
	caps := tg.Adapter.Caps(tg.Conv)
	words := func(units int) (string, int) {
		n := units / len("word ")
		return strings.TrimSpace(strings.Repeat("word ", n)), n
	}
	full, n := words(caps.MaxLen)
	if l := chat.Len(chat.Render(full, caps.Dialect), caps.Dialect); l > caps.MaxLen {
		t.Fatalf("test text renders to %d units, more than MaxLen %d", l, caps.MaxLen)
	}
	send(t, tg, chat.Out{Markdown: full})
	if got := strings.Count(tg.Transcript(tg.Conv), "word"); got != n {
		t.Fatalf("a message of MaxLen: the user sees %d words of %d", got, n)
	}
	over, m := words(3 * caps.MaxLen)
	if _, err := tg.Adapter.Send(ctx, tg.Conv, chat.Out{Markdown: over}); err != nil {
		if got := strings.Count(tg.Transcript(tg.Conv), "word"); got != n {
			t.Errorf("a refused message still shows %d words", got-n)
		}
		return
	}
	if got := strings.Count(tg.Transcript(tg.Conv), "word"); got != n+m {
		t.Errorf("a message of 3×MaxLen: the user sees %d words of %d", got-n, m)
	}
}

func testRateLimit(t *testing.T, tg Target) {
	if tg.RateLimit == nil {
		t.Skip("the platform has no rate limits")
	}
	ref := send(t, tg, chat.Out{Markdown: "limited"})
	tg.RateLimit(2 * time.Second)
	err := tg.Adapter.Edit(ctxOf(t), ref, chat.Out{Markdown: "limited, edited"})
	rl, ok := errors.AsType[*chat.RateLimitError](err)
	if !ok || rl.RetryAfter <= 0 || !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("edit answered 429: %v, want a *chat.RateLimitError with a retry-after", err)
	}
}
