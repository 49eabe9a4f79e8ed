// Package spendtest is the conformance suite of spend.Store: the embedded
// file store passes it, and a store shared by replicas must too.
package spendtest

import (
	"context"
	"testing"

	"github.com/pibot/pibot/gateway/spend"
)

// RunStoreTests checks a Store. open returns a fresh store; reopen, if
// not nil, returns the same store as a restarted process sees it.
func RunStoreTests(t *testing.T, open func(t *testing.T) (s spend.Store, reopen func() spend.Store)) {
	ctx := context.Background()
	keys := []string{"user:a", "conv:x", "global"}
	t.Run("AddAndUsage", func(t *testing.T) {
		s, _ := open(t)
		if u, err := s.Usage(ctx, "2026-01-01", keys); err != nil || len(u) != 3 || u[0] != (spend.Amount{}) {
			t.Fatalf("empty store: %v %v", u, err)
		}
		for range 3 {
			if err := s.Add(ctx, "2026-01-01", keys, spend.Amount{USD: 0.5, Tokens: 100}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Add(ctx, "2026-01-01", []string{"user:b", "global"}, spend.Amount{USD: 1, Tokens: 7}); err != nil {
			t.Fatal(err)
		}
		u, err := s.Usage(ctx, "2026-01-01", []string{"user:a", "user:b", "conv:x", "global", "conv:y"})
		if err != nil {
			t.Fatal(err)
		}
		want := []spend.Amount{{USD: 1.5, Tokens: 300}, {USD: 1, Tokens: 7}, {USD: 1.5, Tokens: 300}, {USD: 2.5, Tokens: 307}, {}}
		for i := range want {
			if u[i] != want[i] {
				t.Errorf("usage %d = %+v, want %+v", i, u[i], want[i])
			}
		}
	})
	t.Run("DaysAreSeparate", func(t *testing.T) {
		s, _ := open(t)
		if err := s.Add(ctx, "2026-01-01", keys, spend.Amount{USD: 3, Tokens: 3}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOverride(ctx, "2026-01-01", "global", spend.Override{Lifted: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.Add(ctx, "2026-01-02", keys, spend.Amount{USD: 1, Tokens: 1}); err != nil {
			t.Fatal(err)
		}
		u, err := s.Usage(ctx, "2026-01-02", keys)
		if err != nil || u[2] != (spend.Amount{USD: 1, Tokens: 1}) {
			t.Errorf("next day's usage = %+v, %v; want only that day's", u, err)
		}
		o, err := s.Overrides(ctx, "2026-01-02", keys)
		if err != nil || o[2] != (spend.Override{}) {
			t.Errorf("next day's overrides = %+v, %v; want none (an override is for one day)", o, err)
		}
	})
	t.Run("Overrides", func(t *testing.T) {
		s, _ := open(t)
		if err := s.SetOverride(ctx, "2026-01-01", "user:a", spend.Override{Cap: spend.Cap{USD: 9}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOverride(ctx, "2026-01-01", "global", spend.Override{Lifted: true}); err != nil {
			t.Fatal(err)
		}
		o, err := s.Overrides(ctx, "2026-01-01", keys)
		if err != nil {
			t.Fatal(err)
		}
		want := []spend.Override{{Cap: spend.Cap{USD: 9}}, {}, {Lifted: true}}
		for i := range want {
			if o[i] != want[i] {
				t.Errorf("override %d = %+v, want %+v", i, o[i], want[i])
			}
		}
	})
	t.Run("SurvivesRestart", func(t *testing.T) {
		s, reopen := open(t)
		if reopen == nil {
			t.Skip("the store has no restart")
		}
		if err := s.Add(ctx, "2026-01-01", keys, spend.Amount{USD: 2, Tokens: 20}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetOverride(ctx, "2026-01-01", "conv:x", spend.Override{Cap: spend.Cap{Tokens: 50}}); err != nil {
			t.Fatal(err)
		}
		s2 := reopen()
		u, err := s2.Usage(ctx, "2026-01-01", keys)
		if err != nil || u[1] != (spend.Amount{USD: 2, Tokens: 20}) {
			t.Errorf("after restart usage = %+v, %v", u, err)
		}
		o, err := s2.Overrides(ctx, "2026-01-01", keys)
		if err != nil || o[1] != (spend.Override{Cap: spend.Cap{Tokens: 50}}) {
			t.Errorf("after restart overrides = %+v, %v", o, err)
		}
	})
}
