package gateway_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/providers/faux"
)

// finalGate holds back the first send or edit that shows text as final
// (no cursor), so a test can act while the reply is being delivered.
type finalGate struct {
	*chattest.Adapter
	text     string
	once     sync.Once
	reached  chan struct{}
	released chan struct{}
}

func (f *finalGate) hold(md string) {
	if strings.Contains(md, f.text) && !strings.Contains(md, "▌") {
		f.once.Do(func() {
			close(f.reached)
			<-f.released
		})
	}
}

func (f *finalGate) Send(ctx context.Context, conv chat.ConvRef, m chat.Out) (chat.MsgRef, error) {
	f.hold(m.Markdown)
	return f.Adapter.Send(ctx, conv, m)
}

func (f *finalGate) Edit(ctx context.Context, ref chat.MsgRef, m chat.Out) error {
	f.hold(m.Markdown)
	return f.Adapter.Edit(ctx, ref, m)
}

// A message that arrives while a finished reply is being delivered starts
// the next run: its sender is not told it steers a run that has already
// answered (the regression: a "will steer" notice, or a 👀, for a message
// the old run never saw).
func TestMessageDuringDeliveryStartsTheNextRun(t *testing.T) {
	gate := &finalGate{text: "first answer", reached: make(chan struct{}), released: make(chan struct{})}
	h := newHarness(t, []faux.Turn{faux.Text("first answer"), faux.Text("second answer")},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { gate.Adapter = a; return gate }))
	h.send("one")
	<-gate.reached
	late := h.send("two")
	close(gate.released)
	h.waitText(dmConv, "second answer")
	for _, c := range h.ad.Calls() {
		if c.Method == chattest.MethodReact && c.Ref.ID == late.Msg.ID {
			t.Errorf("the late message got a %q reaction: it was announced as queued for a run that had answered", c.Text)
		}
		if strings.Contains(c.Text, "will steer") || strings.Contains(c.Text, "queued as a follow-up") {
			t.Errorf("queue notice for a message that starts the next run: %q", c.Text)
		}
	}
	if got := h.lastRequestTexts(); len(got) == 0 || got[len(got)-1] != "two" {
		t.Errorf("second run's request ends with %q, want the late message", got)
	}
}
