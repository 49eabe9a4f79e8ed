package cluster_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/clustertest"
)

func TestLockerConformance(t *testing.T) {
	clustertest.RunLockerTests(t, clustertest.LockerHarness{
		Open: func(t *testing.T, store string) clustertest.Locker {
			l, err := cluster.NewLocker(store)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
	})
}

func TestInboxConformance(t *testing.T) {
	path := func(store string) string { return filepath.Join(store, "inbox.jsonl") }
	open := map[clustertest.Inbox]string{}
	clustertest.RunInboxTests(t, clustertest.InboxHarness{
		Open: func(t *testing.T, store string) clustertest.Inbox {
			ib, err := cluster.OpenInbox(path(store))
			if err != nil {
				t.Fatal(err)
			}
			open[ib] = store
			return ib
		},
		// A killed process leaves the file as it was written: keep a copy,
		// let Close write its clean-stop record, then put the copy back.
		Crash: func(t *testing.T, ib clustertest.Inbox) {
			p := path(open[ib])
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := ib.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestIndexConformance(t *testing.T) {
	path := func(store string) string { return filepath.Join(store, "index.jsonl") }
	open := map[clustertest.Index]string{}
	clustertest.RunIndexTests(t, clustertest.IndexHarness{
		Open: func(t *testing.T, store string) clustertest.Index {
			ix, err := cluster.OpenIndex(path(store), cluster.IndexOptions{})
			if err != nil {
				t.Fatal(err)
			}
			open[ix] = store
			return ix
		},
		// A killed process loses what it only buffered: keep the file as
		// it is, let Close write the rest, then put the copy back.
		Crash: func(t *testing.T, ix clustertest.Index) {
			p := path(open[ix])
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	})
}

func TestDedupeConformance(t *testing.T) {
	clustertest.RunDedupeTests(t, clustertest.DedupeHarness{
		Open: func(t *testing.T, ttl time.Duration, max int) (clustertest.Dedupe, func(time.Duration)) {
			c := clustertest.NewClock()
			d := cluster.NewDedupe(ttl, max)
			d.SetClock(c.Now)
			return d, c.Advance
		},
	})
}

func TestBudgetConformance(t *testing.T) {
	clustertest.RunBudgetTests(t, clustertest.BudgetHarness{
		Open: func(t *testing.T, rate float64, burst int) (clustertest.Budget, func(time.Duration)) {
			c := clustertest.NewClock()
			b := cluster.NewBudget(rate, burst)
			b.SetClock(c.Now)
			return b, c.Advance
		},
	})
}

func TestRatesConformance(t *testing.T) {
	clustertest.RunRatesTests(t, clustertest.RatesHarness{
		Open: func(t *testing.T) (clustertest.Rates, func(time.Duration)) {
			c := clustertest.NewClock()
			r := cluster.NewRates()
			r.SetClock(c.Now)
			return r, c.Advance
		},
	})
}
