package spend_test

import (
	"context"
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
