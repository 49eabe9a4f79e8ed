package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/providers/faux"
)

// TestFailureShownOnce: a model call that fails on every attempt shows its
// error once in the reply, not once per attempt; a call that fails and
// then succeeds on a retry shows no error at all.
func TestFailureShownOnce(t *testing.T) {
	retry := agent.RetryConfig{Enabled: true, MaxRetries: 2, BaseDelay: time.Millisecond,
		Sleep: func(context.Context, time.Duration) error { return nil }}
	h := newHarness(t, []faux.Turn{
		faux.Error("529 overloaded"), faux.Error("529 overloaded"), faux.Error("529 overloaded"),
		faux.Error("529 overloaded"), faux.Text("fine now"),
	}, withConfig(func(c *gateway.Config) { c.Retry = retry }))
	h.send("first")
	h.waitText(dmConv, "⚠️", "overloaded")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })
	count := func() int {
		n := 0
		for _, m := range h.ad.Messages(dmConv) {
			n += strings.Count(m, "⚠️")
		}
		return n
	}
	if n := count(); n != 1 {
		t.Errorf("the failure shown %d times: %q", n, h.ad.Messages(dmConv))
	}
	h.send("second")
	h.waitText(dmConv, "fine now")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })
	if n := count(); n != 1 {
		t.Errorf("a retried failure was shown: %q", h.ad.Messages(dmConv))
	}
}
