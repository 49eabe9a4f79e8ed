package spend_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/gateway/spend"
)

// Usage is counted per agent, whatever the caps, and Report shows it to
// whoever asks about that agent; a Who without an agent shows no line.
func TestAgentUsageCounted(t *testing.T) {
	ctx := context.Background()
	store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	now := func() time.Time { return time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC) }
	l := spend.NewLimiter(store, spend.Caps{PerUser: spend.Cap{Tokens: 1000}}, now)
	ops := spend.Who{User: "slack:U1", Conv: "slack:T:C0OPS", Agent: "ops"}
	if err := l.Record(ctx, ops, spend.Amount{USD: 0.5, Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	h, err := l.Reserve(ctx, spend.Who{User: "slack:U2", Conv: "slack:T:C1", Agent: "ops"}, spend.Amount{Tokens: 50})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, h, spend.Amount{USD: 0.25, Tokens: 40}); err != nil {
		t.Fatal(err)
	}
	if err := l.Record(ctx, spend.Who{User: "slack:U1", Conv: "slack:T:C0WEB", Agent: "web"}, spend.Amount{Tokens: 7}); err != nil {
		t.Fatal(err)
	}
	rep, err := l.Report(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep, "agent `ops` (everyone's use of this agent): $0.7500, 140 tokens") {
		t.Fatalf("report lacks ops's usage:\n%s", rep)
	}
	// The user's own count is unchanged by the agent line: 100 + 7.
	if !strings.Contains(rep, "107 tokens") {
		t.Fatalf("report's user line:\n%s", rep)
	}
	rep, err = l.Report(ctx, spend.Who{User: "slack:U1", Conv: "slack:T:C0OPS"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rep, "agent `") {
		t.Fatalf("a report without an agent shows one:\n%s", rep)
	}
}

// An agent's caps (agents.NAME.spend) refuse its runs and calls once its
// use reaches them, naming the agent's key, while another agent's runs
// go; the gateway-wide caps still apply on top of an agent's.
func TestAgentCaps(t *testing.T) {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC) }
	ops := spend.Who{User: "slack:U1", Conv: "slack:T:C0OPS", Agent: "ops"}
	opsOther := spend.Who{User: "slack:U2", Conv: "slack:T:C0OPS2", Agent: "ops"}
	web := spend.Who{User: "slack:U1", Conv: "slack:T:C0WEB", Agent: "web"}
	agents := map[string]spend.AgentCaps{
		"ops": {Key: "agents.ops.spend", Caps: spend.Caps{Global: spend.Cap{Tokens: 100}, PerUser: spend.Cap{USD: 1}}},
	}
	tests := []struct {
		name    string
		caps    spend.Caps
		used    spend.Who
		amount  spend.Amount
		who     spend.Who
		refused bool
		key     string
	}{
		{name: "agent global reached", used: ops, amount: spend.Amount{Tokens: 100}, who: opsOther, refused: true, key: "agents.ops.spend.global.daily_tokens"},
		{name: "agent per user reached", used: ops, amount: spend.Amount{USD: 1}, who: ops, refused: true, key: "agents.ops.spend.per_user.daily_usd"},
		{name: "agent per user not another user's", used: ops, amount: spend.Amount{USD: 1}, who: opsOther},
		{name: "another agent runs", used: ops, amount: spend.Amount{Tokens: 100}, who: web},
		{name: "gateway-wide cap on top", caps: spend.Caps{PerUser: spend.Cap{Tokens: 50}}, used: web, amount: spend.Amount{Tokens: 50}, who: spend.Who{User: "slack:U1", Conv: "slack:T:C0OPS", Agent: "ops"}, refused: true, key: "limits.per_user.daily_tokens"},
	}
	next := spend.Amount{USD: 0.01, Tokens: 10} // a model call's estimate
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			l := spend.NewLimiter(store, tc.caps, now)
			l.SetAgentCaps(agents)
			if err := l.Record(ctx, tc.used, tc.amount); err != nil {
				t.Fatal(err)
			}
			err = l.Check(ctx, tc.who)
			if !tc.refused {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if _, err := l.Reserve(ctx, tc.who, next); err != nil {
					t.Fatalf("Reserve: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "("+tc.key+")") {
				t.Fatalf("Check = %v, want a refusal naming %s", err, tc.key)
			}
			if _, err := l.Reserve(ctx, tc.who, next); err == nil || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("Reserve = %v, want a refusal naming %s", err, tc.key)
			}
		})
	}
}

// A call that fits the agent's cap is held against it: two calls in
// flight cannot pass it together, and Settle counts the actual usage.
func TestAgentCapHeld(t *testing.T) {
	ctx := context.Background()
	store, err := spend.OpenFile(filepath.Join(t.TempDir(), "spend.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l := spend.NewLimiter(store, spend.Caps{}, nil)
	l.SetAgentCaps(map[string]spend.AgentCaps{"ops": {Key: "agents.ops.spend", Caps: spend.Caps{Global: spend.Cap{Tokens: 100}}}})
	a := spend.Who{User: "slack:U1", Conv: "slack:T:C1", Agent: "ops"}
	b := spend.Who{User: "slack:U2", Conv: "slack:T:C2", Agent: "ops"}
	h, err := l.Reserve(ctx, a, spend.Amount{Tokens: 60})
	if err != nil {
		t.Fatal(err)
	}
	var r *spend.Refusal
	if _, err := l.Reserve(ctx, b, spend.Amount{Tokens: 60}); !errors.As(err, &r) || r.Agent != "ops" || r.Scope != spend.Global {
		t.Fatalf("second call = %v, want the agent's global cap", err)
	}
	if err := l.Settle(ctx, h, spend.Amount{Tokens: 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, b, spend.Amount{Tokens: 60}); err != nil {
		t.Fatalf("after settling 30 of 100: %v", err)
	}
	rep, err := l.Report(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep, "agent `ops` (everyone's use of this agent): $0.0000, 90 tokens; cap 100 tokens") {
		t.Fatalf("report:\n%s", rep)
	}
}
