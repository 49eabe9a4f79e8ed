package slack

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
)

// An envelope is acknowledged only after the sink took it; one the sink
// refused stays unacknowledged, comes again on the next connection and is
// acknowledged then.
func TestSocketAckAfterSink(t *testing.T) {
	h := newHarness(t, "")
	h.run(t)
	_, bodies := h.srv.Post(slacktest.Say{Channel: "D1", User: "U1", Text: "hello"})
	id := h.srv.Deliver("events_api", bodies[0])
	if err := h.srv.WaitAck(id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ok, d := h.srv.Acked(id); !ok || d > 3*time.Second {
		t.Errorf("acked %v after %s, want within 3 s", ok, d)
	}
	if n := len(h.inbound()); n != 1 {
		t.Fatalf("sink got %d events, want 1", n)
	}

	h.mu.Lock()
	h.fail = true
	h.mu.Unlock()
	_, bodies = h.srv.Post(slacktest.Say{Channel: "D1", User: "U1", Text: "not yet durable"})
	id = h.srv.Deliver("events_api", bodies[0])
	time.Sleep(300 * time.Millisecond)
	if ok, _ := h.srv.Acked(id); ok {
		t.Fatal("an envelope the sink refused was acknowledged")
	}
	h.mu.Lock()
	h.fail = false
	h.mu.Unlock()
	h.srv.Disconnect("refresh_requested")
	if err := h.srv.WaitAck(id, 15*time.Second); err != nil {
		t.Fatalf("the refused envelope after a reconnect: %v", err)
	}
	if got := h.inbound(); len(got) != 2 || got[1].Text != "not yet durable" {
		t.Fatalf("sink got %+v", got)
	}
}

// Disconnect envelopes of every reason and a dropped connection lead to a
// new connection; events after it arrive.
func TestSocketReconnects(t *testing.T) {
	h := newHarness(t, "")
	h.run(t)
	for i, reason := range []string{"refresh_requested", "link_disabled", "warning", ""} {
		if reason == "" {
			h.srv.DropConnection()
		} else {
			h.srv.Disconnect(reason)
		}
		if err := h.srv.WaitConnected(i+2, 20*time.Second); err != nil {
			t.Fatalf("after %q: %v", reason, err)
		}
		_, bodies := h.srv.Post(slacktest.Say{Channel: "D1", User: "U1", Text: "after " + reason})
		if err := h.srv.WaitAck(h.srv.Deliver("events_api", bodies[0]), 10*time.Second); err != nil {
			t.Fatalf("after %q: %v", reason, err)
		}
	}
	if n := len(h.inbound()); n != 4 {
		t.Errorf("sink got %d events, want 4", n)
	}
}

// The same event three times and its app_mention twin are each
// acknowledged and carry one dedupe key (the gateway runs it once).
func TestSocketDuplicatesShareAKey(t *testing.T) {
	h := newHarness(t, "")
	h.run(t)
	_, bodies := h.srv.Post(slacktest.Say{Channel: "C1", User: "U1", Text: "<@UBOT> once"})
	if len(bodies) != 2 {
		t.Fatalf("want message + app_mention, got %d bodies", len(bodies))
	}
	ids := []string{h.srv.Deliver("events_api", bodies[0]), h.srv.Deliver("events_api", bodies[1])}
	for range 2 {
		ids = append(ids, h.srv.Deliver("events_api", bodies[0]))
	}
	for _, id := range ids {
		if err := h.srv.WaitAck(id, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	got := h.inbound()
	if len(got) != 4 {
		t.Fatalf("sink got %d, want 4 deliveries", len(got))
	}
	for _, in := range got {
		if in.DedupKey != got[0].DedupKey || in.Text != "once" || !in.Mentioned {
			t.Errorf("delivery %+v, key %q", in, in.DedupKey)
		}
	}
}

// The echo of the bot's own message is acknowledged and not delivered.
func TestSocketOwnEchoAcked(t *testing.T) {
	h := newHarness(t, "")
	h.run(t)
	_, bodies := h.srv.Post(slacktest.Say{Channel: "D1", User: "UBOT", Text: "my answer"})
	if err := h.srv.WaitAck(h.srv.Deliver("events_api", bodies[0]), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := h.inbound(); len(got) != 0 {
		t.Errorf("the bot's own message reached the sink: %+v", got)
	}
}

// A slash command and a button press arrive with an interaction handle.
func TestSocketCommandAndPress(t *testing.T) {
	h := newHarness(t, "")
	h.run(t)
	id := h.srv.Deliver("slash_commands", slacktest.SlashJSON(h.srv.SlashCommand("C1", "U1", "/pi", "stop")))
	if err := h.srv.WaitAck(id, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	other := h.srv.Deliver("slash_commands", slacktest.SlashJSON(h.srv.SlashCommand("C1", "U1", "/other", "x")))
	if err := h.srv.WaitAck(other, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	got := h.inbound()
	if len(got) != 1 || got[0].Command == nil || got[0].Command.Name != "stop" || got[0].Interaction == nil {
		t.Fatalf("sink got %+v", got)
	}
}

// A refused token ends Run with an error that names its key, which Health
// reports from then on (/readyz fails); a temporary failure to connect is
// retried.
func TestRunRefusedTokens(t *testing.T) {
	for _, tc := range []struct {
		name, method, key string
	}{
		{"bot token", "auth.test", "adapters.slack.bot_token"},
		{"app token", "apps.connections.open", "adapters.slack.app_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			h.srv.Fail(tc.method, 1, slacktest.Fault{Kind: slacktest.FaultError, Error: "invalid_auth"})
			done := make(chan error, 1)
			go func() { done <- h.a.Run(t.Context(), h.sink) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.key) {
					t.Fatalf("Run = %v, want an error naming %s", err, tc.key)
				}
				if herr := h.a.Health(); herr == nil || herr.Error() != err.Error() {
					t.Fatalf("Health = %v after Run ended with %v", herr, err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not give up on a refused token")
			}
		})
	}
	h := newHarness(t, "")
	h.srv.Fail("apps.connections.open", 2, slacktest.Fault{Kind: slacktest.Fault5xx})
	h.run(t)
	if n := len(h.srv.CallsOf("apps.connections.open")); n < 3 {
		t.Errorf("%d connection attempts, want the failures retried", n)
	}
	if err := h.a.Health(); err != nil {
		t.Errorf("Health of a connected adapter = %v", err)
	}
}

// While auth.test keeps failing (Slack unreachable at start), Health says
// the adapter is still starting; it is not ready.
func TestHealthWhileStarting(t *testing.T) {
	h := newHarness(t, "")
	if err := h.a.Health(); err != nil {
		t.Fatalf("Health before Run = %v", err)
	}
	h.srv.Fail("auth.test", 1<<20, slacktest.Fault{Kind: slacktest.Fault5xx})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctx, h.sink) }()
	waitFor(t, "Health to say the adapter is starting", func() bool {
		err := h.a.Health()
		return err != nil && strings.Contains(err.Error(), "starting")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after its context ended", err)
	}
}
