package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// TestQueuedMessagesInOneMillisecond is the regression test for matching a
// queued chat message to its session entry through its millisecond
// timestamp: messages queued within the same millisecond got invented
// timestamps (one millisecond later each) so that they could be told
// apart. Each must be recorded with its own sender and platform message
// and with the time it really arrived.
func TestQueuedMessagesInOneMillisecond(t *testing.T) {
	g := newBareGateway(t)
	conv := chat.ConvRef{Platform: "test", Channel: "c", DM: true}
	o, loc, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv})
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	const n = 20
	turns := make([]faux.Turn, n+1)
	for i := range turns {
		turns[i] = faux.Text(fmt.Sprint("answer ", i))
	}
	model := faux.New(llm.ModelInfo{Provider: "faux", ID: "m", ContextWindow: 100000}, turns...)
	a := agent.New(agent.Config{Model: model}, nil)
	r := newTestRun(o, loc, t.Context())
	r.agent.Store(a)
	loc.run = r
	before := time.Now().UnixMilli()
	for i := range n {
		id := fmt.Sprint(i)
		r.o.queue.enqueue(r, &pending{item: inboxItem{In: chat.Inbound{Conv: conv, Text: "m" + id, Msg: chat.MsgRef{Conv: conv, ID: id}, User: chat.User{ID: "u" + id}}}}, false)
	}
	after := time.Now().UnixMilli()
	// Only user messages go through the run's recording here: the test
	// has no reply stream.
	emit := func(e agent.Event) {
		if e.Type == agent.EventMessageEnd && e.Message != nil && e.Message.Role == llm.RoleUser && e.Message.Text() != "start" {
			r.emit(e)
		}
	}
	if err := a.Prompt(t.Context(), emit, llm.UserText("start", before)); err != nil {
		t.Fatal(err)
	}
	if err := o.sess.Flush(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, e := range o.sess.Tree().Entries() {
		if e.Type != session.TypeMessage || e.Message.Role != llm.RoleUser {
			continue
		}
		got++
		text := e.Message.Text()
		if e.Pibot == nil || e.Pibot.Msg != (chat.MsgRef{Conv: conv, ID: text[1:]}).Key() {
			t.Errorf("entry %q is tied to message %+v", text, e.Pibot)
		} else if e.Pibot.From != "u"+text[1:] {
			t.Errorf("entry %q is from %q, want u%s", text, e.Pibot.From, text[1:])
		}
		if ts := e.Message.Timestamp; ts < before || ts > after {
			t.Errorf("entry %q has timestamp %d, outside the %d..%d it was queued in", text, ts, before, after)
		}
	}
	if got != n {
		t.Fatalf("%d user entries, want %d", got, n)
	}
}

// newTestRun builds a run at loc without starting it.
func newTestRun(o *owner, loc *location, ctx context.Context) *run {
	return newRunAt(ctx, nil, o, loc, nil)
}
