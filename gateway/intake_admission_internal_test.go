package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// admissionUnderTest is one admission with the inbox it enqueues into.
type admissionUnderTest struct {
	adm   admission
	inbox Inbox
	// handed lists the ids the admission handed on itself (local; the
	// shared one leaves that to the pump).
	handed *[]string
}

// admissionBackends builds, per test case, the local admission (the
// file inbox, the in-process dedupe and budget) and the shared one on
// every Redis the tests have (miniredis, the real server), all with a
// budget of burst tokens per sender that refills slowly.
func admissionBackends(t *testing.T) map[string]func(t *testing.T, burst int) admissionUnderTest {
	out := map[string]func(t *testing.T, burst int) admissionUnderTest{
		"local": func(t *testing.T, burst int) admissionUnderTest {
			inbox, err := cluster.OpenInbox(filepath.Join(t.TempDir(), "inbox.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inbox.Close() })
			var handed []string
			i := &intake{log: slog.New(slog.DiscardHandler), dedupe: cluster.NewDedupe(time.Hour, 100), budget: cluster.NewBudget(0.001, burst), inbox: inbox,
				accepted: func(ref inboxRef, _ inboxItem) { handed = append(handed, ref.id) }}
			return admissionUnderTest{adm: i.admission(), inbox: inbox, handed: &handed}
		},
	}
	for _, b := range redistest.Backends(t) {
		out["shared/"+b.Name] = func(t *testing.T, burst int) admissionUnderTest {
			rdb, prefix, _ := b.Open(t, t.Name()) // a store of its own per case
			if err := rdb.Ping(t.Context()).Err(); err != nil {
				t.Skipf("%s: %v", b.Name, err)
			}
			opts := rediscluster.Options{Prefix: prefix}
			inbox, err := rediscluster.OpenInbox(t.Context(), rdb, opts, "replica-a")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inbox.Close() })
			store := rediscluster.NewAdmission(rediscluster.NewDedupe(rdb, opts, time.Hour), rediscluster.NewBudget(rdb, opts, 0.001, burst), inbox, nil)
			i := &intake{admit: func(ctx context.Context, ad cluster.Admission, _ inboxItem) (cluster.Admitted, error) {
				return store.Admit(ctx, ad)
			}}
			return admissionUnderTest{adm: i.admission(), inbox: inbox}
		}
	}
	return out
}

// TestAdmissions runs one table over both admissions: what each event
// becomes (a duplicate, over budget, an item) and what the inbox holds.
func TestAdmissions(t *testing.T) {
	type event struct {
		dedupe, budget, data string
		want                 string // "item", "dup" or "wait"
	}
	cases := []struct {
		name   string
		burst  int
		events []event
		inbox  []string // the data of the inbox's items at "k", oldest first
	}{
		{"a new event becomes an item", 2, []event{{"d1", "alice", "a", "item"}}, []string{"a"}},
		{"a redelivery is a duplicate", 2, []event{{"d1", "alice", "a", "item"}, {"d1", "alice", "a", "dup"}}, []string{"a"}},
		{"events without a dedupe key are all taken", 5, []event{{"", "alice", "a", "item"}, {"", "alice", "a", "item"}}, []string{"a", "a"}},
		{"over budget is not enqueued", 2, []event{{"d1", "alice", "a", "item"}, {"d2", "alice", "b", "item"}, {"d3", "alice", "c", "wait"}}, []string{"a", "b"}},
		{"a duplicate takes no budget", 2, []event{{"d1", "alice", "a", "item"}, {"d1", "alice", "a", "dup"}, {"d2", "alice", "b", "item"}}, []string{"a", "b"}},
		{"an event over budget stays seen", 1, []event{{"d1", "alice", "a", "item"}, {"d2", "alice", "b", "wait"}, {"d2", "alice", "b", "dup"}}, []string{"a"}},
		{"each sender has a budget of its own", 1, []event{{"d1", "alice", "a", "item"}, {"d2", "bob", "b", "item"}, {"d3", "alice", "c", "wait"}}, []string{"a", "b"}},
		{"an unbudgeted event is not limited", 1, []event{{"d1", "", "a", "item"}, {"d2", "", "b", "item"}, {"d3", "", "c", "item"}}, []string{"a", "b", "c"}},
	}
	for name, open := range admissionBackends(t) {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				a := open(t, tc.burst)
				var ids []string
				for n, ev := range tc.events {
					data, _ := json.Marshal(ev.data)
					res, err := a.adm.admit(ctx, cluster.Admission{Dedupe: ev.dedupe, Budget: ev.budget, Key: "k", Data: data}, inboxItem{})
					if err != nil {
						t.Fatalf("event %d: %v", n, err)
					}
					got := "item"
					switch {
					case res.Dup:
						got = "dup"
					case res.Wait > 0:
						got = "wait"
					}
					if got != ev.want {
						t.Fatalf("event %d became %s (%+v), want %s", n, got, res, ev.want)
					}
					if (res.ID != "") != (got == "item") {
						t.Fatalf("event %d: id %q for %s", n, res.ID, got)
					}
					if res.ID != "" {
						ids = append(ids, res.ID)
					}
				}
				pending, err := a.inbox.Pending(ctx, "k")
				if err != nil {
					t.Fatal(err)
				}
				var data, pids []string
				for _, p := range pending {
					var d string
					if err := json.Unmarshal(p.Data, &d); err != nil {
						t.Fatal(err)
					}
					data = append(data, d)
					pids = append(pids, p.ID)
				}
				if fmt.Sprint(data) != fmt.Sprint(tc.inbox) || fmt.Sprint(pids) != fmt.Sprint(ids) {
					t.Fatalf("inbox holds %v %v, want %v %v", data, pids, tc.inbox, ids)
				}
				if a.handed != nil && fmt.Sprint(*a.handed) != fmt.Sprint(ids) {
					t.Fatalf("handed on %v, want %v", *a.handed, ids)
				}
			})
		}
	}
}

// TestAdmissionOneTrip: only the shared admission asks in one round trip
// (sink admits direct items whole through it; the local one takes the
// dedupe and the budget as steps of their own).
func TestAdmissionOneTrip(t *testing.T) {
	local := (&intake{}).admission()
	shared := (&intake{admit: func(context.Context, cluster.Admission, inboxItem) (cluster.Admitted, error) {
		return cluster.Admitted{}, nil
	}}).admission()
	if local.oneTrip() || !shared.oneTrip() {
		t.Fatalf("oneTrip: local %v, shared %v", local.oneTrip(), shared.oneTrip())
	}
}
