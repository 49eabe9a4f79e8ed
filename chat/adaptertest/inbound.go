package adaptertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// EventKind is a user's action the suite asks the platform to deliver.
type EventKind int

// Event kinds.
const (
	// EventDM is a message in a one-to-one conversation with the bot.
	EventDM EventKind = iota
	// EventMention is a message on a group conversation's main line that
	// mentions the bot (the platform's mention, added by the Target).
	EventMention
	// EventGroup is a message on a group conversation's main line that
	// does not mention the bot.
	EventGroup
	// EventThreadReply is a message in a thread of a conversation, one
	// that hangs off a message (Slack, Discord, web threads; Telegram
	// forum topics).
	EventThreadReply
	// EventCommand is a command ("/" + Event.Text, or the platform's
	// native command with that name and arguments).
	EventCommand
)

// Event is what the user does.
type Event struct {
	Kind EventKind
	// Text is what the user types, without a mention of the bot (the
	// Target adds it for EventMention) and, for EventCommand, without the
	// command's prefix: "name args".
	Text string
}

// Delivered says where the platform put an Event: what the adapter must
// report for it.
type Delivered struct {
	// Conv is the conversation location the event happened in.
	Conv chat.ConvRef
	// Bound: the platform tells that the bot takes part in the thread (a
	// Discord thread it opened); false where it does not say.
	Bound bool
	// Again makes the platform deliver the same event again, as it does
	// after the adapter left it unacknowledged (a Socket Mode envelope on
	// the next connection, a browser's resend). nil: the platform does it
	// by itself (a Telegram update whose offset was not confirmed), or
	// never (then Caps.Redelivery is not chat.Redelivers and the case is
	// skipped).
	Again func(ctx context.Context) error
}

// inbound runs the adapter for one test and returns what reaches its
// sink. The sink refuses the first refuse events (the gateway's store
// unavailable) and takes the rest.
func inbound(t *testing.T, tg Target, refuse int) (context.Context, <-chan chat.Inbound) {
	t.Helper()
	if tg.Deliver == nil {
		t.Skip("the Target delivers no user events")
	}
	ctx, cancel := context.WithCancel(ctxOf(t))
	got := make(chan chat.Inbound, 16)
	done := make(chan error, 1)
	go func() {
		done <- tg.Adapter.Run(ctx, func(_ context.Context, in chat.Inbound) error {
			got <- in
			if refuse > 0 {
				refuse--
				return fmt.Errorf("adaptertest: %w", chat.ErrUnavailable)
			}
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
	return ctx, got
}

// deliver has the platform deliver ev, skipping the test when the
// platform has no such event.
func deliver(ctx context.Context, t *testing.T, tg Target, ev Event) Delivered {
	t.Helper()
	d, err := tg.Deliver(ctx, ev)
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the platform has no event of kind %d", ev.Kind)
	}
	if err != nil {
		t.Fatalf("deliver %+v: %v", ev, err)
	}
	return d
}

// await returns the next event that reaches the sink with a dedupe key
// not in seen (a platform's twin of an event already seen, such as
// Slack's app_mention beside its message, must carry the same key and
// conversation) and adds its key to seen.
func await(t *testing.T, got <-chan chat.Inbound, seen map[string]chat.Inbound) chat.Inbound {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case in := <-got:
			if first, ok := seen[in.DedupKey]; ok {
				if in.Conv != first.Conv || in.Msg.Key() != first.Msg.Key() {
					t.Errorf("two events with the dedupe key %q: %s#%s and %s#%s", in.DedupKey, first.Conv, first.Msg.ID, in.Conv, in.Msg.ID)
				}
				continue
			}
			seen[in.DedupKey] = in
			return in
		case <-timeout:
			t.Fatal("the event did not reach the sink")
			return chat.Inbound{}
		}
	}
}

// checkMessage checks what every delivered user message carries.
func checkMessage(t *testing.T, tg Target, d Delivered, in chat.Inbound, text string) {
	t.Helper()
	if in.Kind != chat.KindMessage {
		t.Errorf("kind %d, want a message", in.Kind)
	}
	if in.Conv != d.Conv {
		t.Errorf("conversation %+v, want %+v", in.Conv, d.Conv)
	}
	if in.Conv.Platform != tg.Adapter.Platform() {
		t.Errorf("platform %q, want %q", in.Conv.Platform, tg.Adapter.Platform())
	}
	if in.Msg.ID == "" || in.Msg.Conv != in.Conv {
		t.Errorf("message ref %+v: want an id in the event's conversation", in.Msg)
	}
	if in.DedupKey == "" {
		t.Error("no dedupe key: a redelivery would be taken twice")
	}
	if in.User.ID != tg.User || in.User.IsBot {
		t.Errorf("user %+v, want the user %q", in.User, tg.User)
	}
	if text != "" && in.Text != text {
		t.Errorf("text %q, want %q", in.Text, text)
	}
	if in.Bound != d.Bound {
		t.Errorf("bound = %v, want %v (what the platform said)", in.Bound, d.Bound)
	}
	if in.Bound && in.Conv.Thread == "" {
		t.Error("bound on a main line: only a thread can be bound")
	}
}

func testInboundDM(t *testing.T, tg Target) {
	ctx, got := inbound(t, tg, 0)
	d := deliver(ctx, t, tg, Event{Kind: EventDM, Text: "hello there"})
	in := await(t, got, map[string]chat.Inbound{})
	checkMessage(t, tg, d, in, "hello there")
	if !in.Conv.DM || in.Conv.Thread != "" {
		t.Errorf("conversation %+v, want a DM's main line", in.Conv)
	}
	if in.Command != nil {
		t.Errorf("a plain message parsed as the command %+v", in.Command)
	}
}

func testInboundMention(t *testing.T, tg Target) {
	ctx, got := inbound(t, tg, 0)
	seen := map[string]chat.Inbound{}
	d := deliver(ctx, t, tg, Event{Kind: EventMention, Text: "what now"})
	in := await(t, got, seen)
	checkMessage(t, tg, d, in, "what now")
	if !in.Mentioned {
		t.Error("a message mentioning the bot is not Mentioned")
	}
	if in.Conv.DM || in.Conv.Thread != "" {
		t.Errorf("conversation %+v, want a group's main line", in.Conv)
	}
	d = deliver(ctx, t, tg, Event{Kind: EventGroup, Text: "chatter among us"})
	in = await(t, got, seen)
	checkMessage(t, tg, d, in, "chatter among us")
	if in.Mentioned {
		t.Error("a group message without a mention is Mentioned")
	}
}

func testInboundThreadReply(t *testing.T, tg Target) {
	ctx, got := inbound(t, tg, 0)
	d := deliver(ctx, t, tg, Event{Kind: EventThreadReply, Text: "and then?"})
	in := await(t, got, map[string]chat.Inbound{})
	checkMessage(t, tg, d, in, "and then?")
	if in.Conv.Thread == "" {
		t.Fatalf("conversation %+v: a reply in a thread on the main line", in.Conv)
	}
	main := in.Conv
	main.Thread = ""
	if !strings.HasPrefix(in.Conv.Key(), main.Key()+":") {
		t.Errorf("the thread's key %q does not extend its channel's %q", in.Conv.Key(), main.Key())
	}
}

func testInboundCommand(t *testing.T, tg Target) {
	ctx, got := inbound(t, tg, 0)
	d := deliver(ctx, t, tg, Event{Kind: EventCommand, Text: "model openai/gpt-5"})
	in := await(t, got, map[string]chat.Inbound{})
	if in.Command == nil || in.Command.Name != "model" || in.Command.Args != "openai/gpt-5" {
		t.Fatalf("command %+v, want model openai/gpt-5", in.Command)
	}
	if in.Kind != chat.KindMessage || in.Conv != d.Conv || in.DedupKey == "" || in.User.ID != tg.User {
		t.Errorf("command delivered as %+v, want a message in %+v with a dedupe key", in, d.Conv)
	}
}

// testInboundRedelivery: an event the sink refused comes again, with the
// same dedupe key, message and conversation, so the gateway's dedupe
// recognises a copy it took after all and takes the first it can.
func testInboundRedelivery(t *testing.T, tg Target) {
	ctx, got := inbound(t, tg, 1)
	d := deliver(ctx, t, tg, Event{Kind: EventDM, Text: "say it again"})
	first := await(t, got, map[string]chat.Inbound{})
	checkMessage(t, tg, d, first, "say it again")
	switch {
	case d.Again != nil:
		if err := d.Again(ctx); err != nil {
			t.Fatalf("deliver again: %v", err)
		}
	case tg.Adapter.Caps(d.Conv).Redelivery != chat.Redelivers:
		t.Skip("the platform does not deliver a refused event again")
	}
	var again chat.Inbound
	select {
	case again = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the refused event was not delivered again")
	}
	if again.DedupKey != first.DedupKey || again.Msg.Key() != first.Msg.Key() || again.Conv != first.Conv || again.Text != first.Text {
		t.Errorf("redelivered as %s#%s key %q text %q; first %s#%s key %q text %q",
			again.Conv, again.Msg.ID, again.DedupKey, again.Text, first.Conv, first.Msg.ID, first.DedupKey, first.Text)
	}
}
