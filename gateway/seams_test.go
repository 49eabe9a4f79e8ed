package gateway_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/providers/faux"
)

// downBudget is a shared sender budget whose store is unreachable.
type downBudget struct{ calls atomic.Int32 }

func (b *downBudget) Reserve(context.Context, string) (time.Duration, error) {
	b.calls.Add(1)
	return 0, errors.New("budget store unreachable")
}

// TestUnreachableSenderBudgetLetsMessagesThrough: a budget that cannot
// be asked (Redis down) does not stop a paired user's messages.
func TestUnreachableSenderBudgetLetsMessagesThrough(t *testing.T) {
	b := &downBudget{}
	h := newHarness(t, []faux.Turn{faux.Text("still answering")}, withBudget(b))
	stranger := chat.ConvRef{Platform: "test", Channel: "dm-ann", DM: true}
	cli, err := access.OpenStore(filepath.Join(h.dir, "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	h.send("hi", inConv(stranger), from("ann"))
	h.waitText(stranger, "pairing code")
	reqs, _, err := cli.List(t.Context())
	if err != nil || len(reqs) != 1 {
		t.Fatalf("pending = %+v, %v", reqs, err)
	}
	if _, err := cli.Approve(t.Context(), "test", reqs[0].Code); err != nil {
		t.Fatal(err)
	}
	h.send("hello", inConv(stranger), from("ann"))
	h.waitText(stranger, "still answering")
	if b.calls.Load() == 0 {
		t.Fatal("the budget was never asked")
	}
}
