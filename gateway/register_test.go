package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
)

// heldCommands is an adapter whose platform does not answer the command
// registration until release is closed (an unreachable Bot API).
type heldCommands struct {
	*chattest.Adapter
	release chan struct{}
}

func (a heldCommands) RegisterCommands(ctx context.Context, cmds []chat.CommandSpec) error {
	select {
	case <-a.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return a.Adapter.RegisterCommands(ctx, cmds)
}

// The gateway is ready, and answers, while a platform has not taken the
// command list: the registration goes on in the background (an
// unreachable Bot API held "ready" for its retries, about 4 s).
func TestReadyDoesNotWaitForCommandRegistration(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, nil, withAdapter(func(ad *chattest.Adapter) chat.Adapter { return heldCommands{ad, release} }))
	select {
	case <-h.g.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("the gateway is not ready while a platform holds the command registration")
	}
	if got := h.answer(dmConv, "owner", "/help"); got == "" {
		t.Error("no answer while the registration is held")
	}
	if len(h.ad.Commands()) != 0 {
		t.Fatal("commands registered before the platform answered")
	}
	close(release)
	h.waitFor("the command list", func() bool { return len(h.ad.Commands()) > 0 })
}
