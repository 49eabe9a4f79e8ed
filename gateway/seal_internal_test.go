package gateway

import (
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
)

// TestLateMessageGoesToTheNextRun is the regression test for a message
// steered into a run that had already emptied its queues for the last
// time: it must wait for the next run, not sit in a dead agent.
func TestLateMessageGoesToTheNextRun(t *testing.T) {
	g := newBareGateway(t)
	conv := chat.ConvRef{Platform: "test", Channel: "c", DM: true}
	o, loc, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv})
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	a := agent.New(agent.Config{}, nil)
	r := newRunAt(t.Context(), nil, o, loc, nil)
	r.agent.Store(a)
	loc.run = r
	early := &pending{item: inboxItem{In: chat.Inbound{Conv: conv, Text: "early"}}}
	if !r.o.queue.enqueue(r, early, true) {
		t.Error("a live run's message was not reported as waiting for it")
	}
	if st, _ := a.Queued(); len(st) != 1 {
		t.Fatalf("a live run did not take the steering message: %d queued", len(st))
	}
	// The run seals its queues before it delivers the reply.
	r.gate.close()
	late := &pending{item: inboxItem{In: chat.Inbound{Conv: conv, Text: "late"}}}
	if r.o.queue.enqueue(r, late, true) {
		t.Error("a sealed run's message was reported as waiting for it")
	}
	if st, _ := a.Queued(); len(st) != 1 {
		t.Fatalf("a sealed run took a message: %d queued", len(st))
	}
	o.mu.Lock()
	next := loc.waits.next
	o.mu.Unlock()
	if len(next) != 1 || next[0] != late {
		t.Fatalf("the late message is not waiting for the next run: %+v", next)
	}
}
