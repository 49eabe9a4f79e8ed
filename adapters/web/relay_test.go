package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/web/webtest"
	"github.com/pibot/pibot/chat"
)

var _ Bus = (*webtest.Hub)(nil)

// replicas returns n running adapters sharing hub, as the web chats of n
// cluster replicas share Redis, once every one has subscribed.
func replicas(t *testing.T, hub *webtest.Hub, n int) ([]*Adapter, []*recorder) {
	t.Helper()
	var as []*Adapter
	var recs []*recorder
	for range n {
		a := newAdapter(t, Config{Bus: hub})
		rec := &recorder{}
		run(t, a, rec.sink)
		as = append(as, a)
		recs = append(recs, rec)
	}
	deadline := time.Now().Add(10 * time.Second)
	for hub.Subscribers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replicas subscribed", hub.Subscribers(), n)
		}
		waitABit()
	}
	return as, recs
}

// TestRelayShowsAnotherReplicasReply: a browser connected to replica A
// sends a message; replica B, which holds the conversation's session,
// replies (message, status line, edit with buttons, toast); A's browser
// sees all of it live, can press B's button, and a browser of another
// conversation sees none of it.
func TestRelayShowsAnotherReplicasReply(t *testing.T) {
	ctx := t.Context()
	hub := webtest.NewHub()
	as, recs := replicas(t, hub, 2)
	a, b := as[0], as[1]
	srvA, srvB := serve(t, a), serve(t, b)
	c := conv("c1", "")

	onA := openEvents(t, srvA, "conv=c1", "")
	onA.untilReady(t)
	otherOnA := openEvents(t, srvA, "conv=c2", "")
	otherOnA.untilReady(t)
	onB := openEvents(t, srvB, "conv=c1", "")
	onB.untilReady(t)

	if code, body := post(t, srvA, "/api/send", `{"conv":"c1","id":"m1","text":"hello"}`); code != 200 {
		t.Fatalf("send on A: %d %s", code, body)
	}
	if ev := onA.next(t); ev.Type != "msg" || ev.ID != "u-m1" || ev.From != fromUser {
		t.Fatalf("A's own browser: %+v", ev)
	}
	// B's browsers see the user's message too (a second tab, or the same
	// browser reconnected to B).
	if ev := onB.next(t); ev.Type != "msg" || ev.ID != "u-m1" || ev.Text != "hello" || ev.From != fromUser {
		t.Fatalf("B's browser: %+v", ev)
	}

	// B runs the conversation and replies.
	if err := b.SetStatus(ctx, c, "thinking…"); err != nil {
		t.Fatal(err)
	}
	ev := onA.next(t)
	if ev.Type != "status" || ev.Text != "thinking…" || ev.Since == nil {
		t.Fatalf("status on A: %+v", ev)
	}
	b.store.mu.Lock()
	since := b.store.convs["c1"].lines[""].since
	b.store.mu.Unlock()
	if !ev.Since.Equal(since) {
		t.Errorf("status on A began %v, on B %v: A's clock shows another time", ev.Since, since)
	}
	ref, err := b.Send(ctx, c, chat.Out{Markdown: "hel"})
	if err != nil {
		t.Fatal(err)
	}
	if ev := onA.next(t); ev.Type != "msg" || ev.ID != ref.ID || ev.Text != "hel" || ev.From != fromBot {
		t.Fatalf("reply on A: %+v", ev)
	}
	if err := b.Edit(ctx, ref, chat.Out{Markdown: "hello back. Run bash?", Buttons: [][]chat.Button{{{ID: "ok", Label: "Allow"}}}}); err != nil {
		t.Fatal(err)
	}
	if ev := onA.next(t); ev.ID != ref.ID || ev.Text != "hello back. Run bash?" || len(ev.Buttons) != 1 || ev.Buttons[0][0].ID != "ok" {
		t.Fatalf("edit on A: %+v", ev)
	}

	// A's browser presses B's button: A knows the message and its
	// buttons, and feeds the press to its gateway (which queues it for B).
	if code, body := post(t, srvA, "/api/action", `{"conv":"c1","msg":"`+ref.ID+`","data":"ok","id":"p1"}`); code != 200 {
		t.Fatalf("press on A: %d %s", code, body)
	}
	got := recs[0].got()
	if len(got) != 2 || got[1].Kind != chat.KindAction || got[1].Action.Msg != ref {
		t.Fatalf("A's gateway got %+v", got)
	}
	ix := *got[1].Interaction
	if _, err := b.Answer(ctx, ix, chat.Answer{Replace: &chat.Out{}, Toast: "allowed"}); err != nil {
		t.Fatal(err)
	}
	if ev := onA.next(t); ev.ID != ref.ID || len(ev.Buttons) != 0 || ev.Text != "hello back. Run bash?" {
		t.Fatalf("answer's edit on A: %+v", ev)
	}
	if ev := onA.next(t); ev.Type != "toast" || ev.Text != "allowed" {
		t.Fatalf("toast on A: %+v", ev)
	}
	if err := b.SetStatus(ctx, c, ""); err != nil {
		t.Fatal(err)
	}
	if ev := onA.next(t); ev.Type != "status" || ev.Text != "" {
		t.Fatalf("cleared status on A: %+v", ev)
	}

	// A replica that takes the conversation over edits B's reply.
	if err := a.Edit(ctx, ref, chat.Out{Markdown: "hello back (interrupted)"}); err != nil {
		t.Fatalf("A edits B's message: %v", err)
	}
	for {
		ev := onB.next(t)
		if ev.ID == ref.ID && ev.Text == "hello back (interrupted)" {
			break
		}
	}

	// The other conversation's browser saw nothing of c1: its first
	// event is the one sent to it.
	if _, err := b.Send(ctx, conv("c2", ""), chat.Out{Markdown: "for c2"}); err != nil {
		t.Fatal(err)
	}
	if ev := otherOnA.next(t); ev.Text != "for c2" {
		t.Fatalf("c2's browser got %+v first", ev)
	}

	// A reconnecting browser (an id from B lands on A) gets A's whole log.
	s := openEvents(t, srvA, "conv=c1", b.store.eventID(1))
	if ev := s.next(t); ev.Type != "reset" {
		t.Fatalf("want reset, got %+v", ev)
	}
	var texts []string
	seen := map[string]bool{}
	for _, ev := range s.untilReady(t) {
		if ev.Type == "msg" && !seen[ev.ID] { // a creation, then its latest edit
			seen[ev.ID] = true
			texts = append(texts, ev.Text)
		}
	}
	if len(texts) != 2 || texts[0] != "hello" || texts[1] != "hello back (interrupted)" {
		t.Errorf("A's log after a reconnect: %q", texts)
	}
}

// TestRelayDropsBadEvents: what another replica publishes is checked
// before it reaches a conversation log; an adapter skips its own events
// (it applied them when it made them).
func TestRelayDropsBadEvents(t *testing.T) {
	a := newAdapter(t, Config{Bus: webtest.NewHub()})
	long := strings.Repeat("x", maxNoticeText+1)
	tests := []struct {
		name    string
		payload string
	}{
		{"not json", `{`},
		{"own event", `{"from":"` + a.store.epoch + `","conv":"c1","msg":{"id":"b1","from":"bot","text":"x"}}`},
		{"bad conversation", `{"from":"r2","conv":"c 1","msg":{"id":"b1","from":"bot","text":"x"}}`},
		{"nothing", `{"from":"r2","conv":"c1"}`},
		{"both", `{"from":"r2","conv":"c1","msg":{"id":"b1","from":"bot","text":"x"},"notice":{"type":"toast","text":"x"}}`},
		{"bad message id", `{"from":"r2","conv":"c1","msg":{"id":"b/1","from":"bot","text":"x"}}`},
		{"no message id", `{"from":"r2","conv":"c1","msg":{"from":"bot","text":"x"}}`},
		{"bad sender", `{"from":"r2","conv":"c1","msg":{"id":"b1","from":"root","text":"x"}}`},
		{"bad thread", `{"from":"r2","conv":"c1","msg":{"id":"b1","thread":"t!","from":"bot","text":"x"}}`},
		{"bad notice type", `{"from":"r2","conv":"c1","notice":{"type":"alert","text":"x"}}`},
		{"long notice", `{"from":"r2","conv":"c1","notice":{"type":"toast","text":"` + long + `"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.relay.apply([]byte(tt.payload))
			a.store.mu.Lock()
			defer a.store.mu.Unlock()
			if l := a.store.convs["c1"]; l != nil && len(l.entries) > 0 {
				t.Errorf("applied: %d entries", len(l.entries))
			}
		})
	}
	// A good one is applied, and a repeat with new text updates it.
	a.relay.apply([]byte(`{"from":"r2","conv":"c1","msg":{"id":"u-m1","thread":"t1","from":"user","text":"hi"}}`))
	a.relay.apply([]byte(`{"from":"r2","conv":"c1","msg":{"id":"u-m1","thread":"t1","from":"user","text":"hi","error":"refused"}}`))
	a.store.mu.Lock()
	defer a.store.mu.Unlock()
	m := a.store.convs["c1"].msgs["u-m1"]
	if m == nil || m.Type != "msg" || m.Error != "refused" || len(a.store.convs["c1"].entries) != 2 {
		t.Errorf("good event: %+v", m)
	}
}

// TestRelayPublishesWhatRunDidNotSee: events written while Run is not
// active are published once it runs, in order.
func TestRelayPublishesWhatRunDidNotSee(t *testing.T) {
	hub := webtest.NewHub()
	as, _ := replicas(t, hub, 1)
	b := newAdapter(t, Config{Bus: hub})
	ref, err := b.Send(t.Context(), conv("c1", ""), chat.Out{Markdown: "early"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Edit(t.Context(), ref, chat.Out{Markdown: "early, edited"}); err != nil {
		t.Fatal(err)
	}
	run(t, b, (&recorder{}).sink)
	srv := serve(t, as[0])
	s := openEvents(t, srv, "conv=c1", "")
	for {
		ev := s.next(t)
		if ev.ID == ref.ID && ev.Text == "early, edited" {
			return
		}
	}
}

// TestRelayHealsALostEvent: events lost on the bus (a subscription
// reconnecting) leave the other replica's browsers behind only until the
// message changes again: each event carries the message's whole state.
func TestRelayHealsALostEvent(t *testing.T) {
	ctx := t.Context()
	hub := webtest.NewHub()
	as, _ := replicas(t, hub, 2)
	a, b := as[0], as[1]
	onA := openEvents(t, serve(t, a), "conv=c1", "")
	onA.untilReady(t)
	c := conv("c1", "")

	hub.Cut(true)
	before := hub.Published()
	ref, err := b.Send(ctx, c, chat.Out{Markdown: "lost"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetStatus(ctx, c, "lost too"); err != nil {
		t.Fatal(err)
	}
	// Wait until B's publisher has handed both to the hub, which drops them.
	for hub.Published() < before+2 {
		waitABit()
	}
	hub.Cut(false)
	if err := b.Edit(ctx, ref, chat.Out{Markdown: "found again"}); err != nil {
		t.Fatal(err)
	}
	if ev := onA.next(t); ev.Type != "msg" || ev.ID != ref.ID || ev.Text != "found again" || ev.From != fromBot {
		t.Fatalf("A's browser after the loss: %+v", ev)
	}
}

// blockedBus is a bus whose publishes hang until their context ends, as
// towards a Redis that does not answer.
type blockedBus struct{}

func (blockedBus) Publish(ctx context.Context, _ []byte) error {
	<-ctx.Done()
	return ctx.Err()
}

func (blockedBus) Subscribe(ctx context.Context, _ func([]byte)) error {
	<-ctx.Done()
	return nil
}

// TestRelayNeverHoldsUpTheChat: while the bus does not answer, the chat
// goes on (the events beyond the queue are dropped) and Run still ends.
func TestRelayNeverHoldsUpTheChat(t *testing.T) {
	a := newAdapter(t, Config{Bus: blockedBus{}})
	stop := runStoppable(t, a)
	srv := serve(t, a)
	s := openEvents(t, srv, "conv=c1", "")
	s.untilReady(t)
	var last chat.MsgRef
	for i := range relayQueue + 10 {
		ref, err := a.Send(t.Context(), conv("c1", ""), chat.Out{Markdown: fmt.Sprint("m", i)})
		if err != nil {
			t.Fatal(err)
		}
		last = ref
	}
	for ev := s.next(t); ev.ID != last.ID; ev = s.next(t) {
	}
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}
