package gateway_test

import (
	"context"
	"iter"
	"testing"

	"github.com/pibot/pibot/llm"
)

// stalledModel holds every request until release is closed.
type stalledModel struct {
	llm.Model
	release chan struct{}
}

func (m *stalledModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	select {
	case <-m.release:
	case <-ctx.Done():
	}
	return m.Model.Stream(ctx, req)
}

// TestNewSessionFileIsCreatedBeforeTheReply: a new conversation's session
// file (and its fsyncs) is created while the run waits for the model, not
// by the reply's first write on the provider's stream, nor a group window
// (an hour here) later.
func TestNewSessionFileIsCreatedBeforeTheReply(t *testing.T) {
	stalled := &stalledModel{release: make(chan struct{})}
	h := newHarness(t, nil, withConfig(longWindow), withModel(func(m llm.Model) llm.Model { stalled.Model = m; return stalled }))
	t.Cleanup(func() { close(stalled.release) }) // before the harness stops
	h.send("hello")
	h.waitFor("the new session's file while the model has not answered", func() bool { return len(h.sessions()) == 1 })
	if msgs := h.ad.Messages(dmConv); len(msgs) != 0 {
		t.Fatalf("the chat shows %q before the model answered", msgs)
	}
}
