package gateway

import (
	"context"
	"fmt"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
)

// TestAcceptOffersTheGoroutineToTheRunItStarts: queue.accept hands the
// offer of the mailbox goroutine a message's item runs on (takeOver) to
// the run the message starts at once, and to nothing else. A message that
// steers, queues, interrupts or is collected asks nothing of the
// goroutine, a refused offer (work waits behind the item) or none gives
// the run a goroutine of its own, and a message routed again (its owner
// closed since routing) carries the offer along.
func TestAcceptOffersTheGoroutineToTheRunItStarts(t *testing.T) {
	g := newBareGateway(t)
	for i, tc := range []struct {
		name   string
		mode   string
		busy   bool   // a run is active at the location
		closed bool   // the owner closed since routing
		offer  string // "given", "refused" or "" (none)
		// wantAsked: calls of the offer; wantHere, wantNew: runs started on
		// the offered goroutine and on a new one.
		wantAsked, wantHere, wantNew int
		wantRerouted                 bool
	}{
		{name: "idle, offer given", mode: modeSteer, offer: "given", wantAsked: 1, wantHere: 1},
		{name: "idle, offer refused", mode: modeFollowup, offer: "refused", wantAsked: 1, wantNew: 1},
		{name: "idle, no offer", mode: modeSteer, wantNew: 1},
		{name: "busy, steer", mode: modeSteer, busy: true, offer: "given"},
		{name: "busy, follow-up", mode: modeFollowup, busy: true, offer: "given"},
		{name: "busy, interrupt", mode: modeInterrupt, busy: true, offer: "given"},
		{name: "collect", mode: modeCollect, offer: "given"},
		{name: "owner closed", mode: modeSteer, closed: true, offer: "given", wantAsked: 1, wantRerouted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conv := chat.ConvRef{Platform: "test", Channel: fmt.Sprint("c", i), DM: true}
			o, loc, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv})
			if err != nil {
				t.Fatal(err)
			}
			defer o.close()
			var here, started int
			// The runs are only counted, never executed.
			o.runs.track = func(func(context.Context)) { started++ }
			o.runs.trackHere = func(take takeOver, _ func(context.Context)) bool {
				if !take() {
					return false
				}
				here++
				return true
			}
			rerouted := false
			o.route = func(_ context.Context, _ *pending, take takeOver) {
				rerouted = true
				if take != nil {
					take()
				}
			}
			if tc.busy {
				r := newTestRun(o, loc, t.Context())
				r.agent.Store(agent.New(agent.Config{}, nil))
				loc.run = r
			}
			if tc.closed {
				o.close()
			}
			asked := 0
			var take takeOver
			switch tc.offer {
			case "given":
				take = func() bool { asked++; return true }
			case "refused":
				take = func() bool { asked++; return false }
			}
			p := &pending{item: inboxItem{In: chat.Inbound{Conv: conv, Text: "hello"}, Mode: tc.mode}}
			o.queue.accept(t.Context(), loc, p, take)
			if asked != tc.wantAsked || here != tc.wantHere || started != tc.wantNew || rerouted != tc.wantRerouted {
				t.Fatalf("offer asked %d times, runs here %d, on new goroutines %d, rerouted %v; want %d, %d, %d, %v",
					asked, here, started, rerouted, tc.wantAsked, tc.wantHere, tc.wantNew, tc.wantRerouted)
			}
		})
	}
}
