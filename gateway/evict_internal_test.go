package gateway

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway/access"
)

// newBareGateway is a gateway with no adapters and no models, not running:
// for tests of its owners and locations.
func newBareGateway(t *testing.T) *Gateway {
	t.Helper()
	dir := t.TempDir()
	inbox, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	locker, err := cluster.NewLocker(dir)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{DataDir: dir, Model: "faux/m"}, Deps{Access: access.NewChecker(access.Policy{}, nil), Inbox: inbox, Dedupe: cluster.NewDedupe(time.Hour, 10), Locker: locker})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestIdleSessionsAreEvicted(t *testing.T) {
	g := newBareGateway(t)
	const n = 50
	for i := range n {
		conv := chat.ConvRef{Platform: "test", Channel: fmt.Sprint("c", i), DM: true}
		if _, _, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv}); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.sessions.ownerCount(); got != n {
		t.Fatalf("%d owners loaded, want %d", got, n)
	}
	if got := g.sessions.evictIdle(time.Now().Add(-time.Hour)); got != 0 {
		t.Fatalf("evicted %d sessions that were just used", got)
	}
	if got := g.sessions.evictIdle(time.Now().Add(time.Second)); got != n {
		t.Fatalf("evicted %d, want %d", got, n)
	}
	if g.sessions.ownerCount() != 0 {
		t.Fatal("owners left after eviction")
	}
	// An evicted session is reloaded on demand with its location intact.
	conv := chat.ConvRef{Platform: "test", Channel: "c7", DM: true}
	o, loc, err := g.sessions.locate(t.Context(), chat.Inbound{Conv: conv})
	if err != nil {
		t.Fatal(err)
	}
	if o.head(loc) == "" {
		t.Fatal("reloaded session lost its head")
	}
	if g.sessions.ownerCount() != 1 {
		t.Fatalf("owners after reload = %d", g.sessions.ownerCount())
	}
	o.close()
}
