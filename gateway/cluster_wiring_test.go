package gateway_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
)

// onlyInbox is an inbox with nothing but the gateway.Inbox methods: it
// hides the LocalInbox's Consume (and its other abilities).
type onlyInbox struct{ gateway.Inbox }

// TestNewRefusesClusterModeWithoutConsumer: cluster mode runs items
// through the pump, which takes them with Consume; an inbox that cannot
// is refused by New instead of giving a gateway that silently never
// takes another replica's items. Outside cluster mode it is fine.
func TestNewRefusesClusterModeWithoutConsumer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster bool
		hide    bool
		wantErr bool
	}{
		{"cluster mode, inbox consumes", true, false, false},
		{"cluster mode, inbox cannot consume", true, true, true},
		{"local mode, inbox cannot consume", false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ib, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ib.Close() })
			locker, err := cluster.NewLocker(dir)
			if err != nil {
				t.Fatal(err)
			}
			var inbox gateway.Inbox = ib
			if tc.hide {
				inbox = onlyInbox{ib}
			}
			cfg := gateway.Config{DataDir: dir, Model: "faux/m", Cluster: gateway.ClusterConfig{Enabled: tc.cluster}}
			_, err = gateway.New(cfg, gateway.Deps{Access: access.NewChecker(access.Policy{}, nil), Inbox: inbox,
				Dedupe: cluster.NewDedupe(time.Hour, 10), Locker: locker})
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "cluster.Consumer") {
					t.Fatalf("New = %v, want the refusal of an inbox that cannot consume", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}
