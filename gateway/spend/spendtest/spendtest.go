// Package spendtest is the conformance suite of spend.Store: the embedded
// file store passes it, and a store shared by replicas must too.
package spendtest

import (
	"context"
	"sync"
	"sync/atomic"
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
	t.Run("Reserve", func(t *testing.T) {
		s, _ := open(t)
		day := "2026-01-01"
		if err := s.Add(ctx, day, keys, spend.Amount{USD: 0.5, Tokens: 900}); err != nil {
			t.Fatal(err)
		}
		caps := []spend.Cap{{Tokens: 1000}, {}, {USD: 1}}
		// 900 + 100 fits exactly.
		ok, used, err := s.Reserve(ctx, day, keys, caps, spend.Amount{USD: 0.25, Tokens: 100})
		if err != nil || !ok {
			t.Fatalf("reserve within the caps = %v, %v", ok, err)
		}
		if len(used) != 3 || used[0] != (spend.Amount{USD: 0.5, Tokens: 900}) {
			t.Errorf("usage compared = %+v, want the usage before the reservation", used)
		}
		// One more token passes the user's cap: nothing is added to any key.
		ok, used, err = s.Reserve(ctx, day, keys, caps, spend.Amount{Tokens: 1})
		if err != nil || ok {
			t.Fatalf("reserve past a token cap = %v, %v; want refused", ok, err)
		}
		if used[0].Tokens != 1000 {
			t.Errorf("refusal's usage = %+v, want the user's 1000 tokens", used)
		}
		// A dollar cap: 0.75 + 0.5 passes $1.
		if ok, _, err := s.Reserve(ctx, day, []string{"user:b", "conv:x", "global"}, caps, spend.Amount{USD: 0.5}); err != nil || ok {
			t.Fatalf("reserve past the global dollar cap = %v, %v; want refused", ok, err)
		}
		u, err := s.Usage(ctx, day, []string{"user:a", "conv:x", "global", "user:b"})
		if err != nil {
			t.Fatal(err)
		}
		want := []spend.Amount{{USD: 0.75, Tokens: 1000}, {USD: 0.75, Tokens: 1000}, {USD: 0.75, Tokens: 1000}, {}}
		for i := range want {
			if !near(u[i], want[i]) {
				t.Errorf("usage %d after the refusals = %+v, want %+v (a refused reservation adds nothing)", i, u[i], want[i])
			}
		}
		// Zero caps are no limit; a negative Add settles a reservation.
		if ok, _, err := s.Reserve(ctx, day, keys, make([]spend.Cap, 3), spend.Amount{USD: 5, Tokens: 5000}); err != nil || !ok {
			t.Fatalf("reserve without caps = %v, %v", ok, err)
		}
		if err := s.Add(ctx, day, keys, spend.Amount{USD: -5, Tokens: -4990}); err != nil {
			t.Fatal(err)
		}
		u, err = s.Usage(ctx, day, keys)
		if err != nil || !near(u[0], spend.Amount{USD: 0.75, Tokens: 1010}) {
			t.Errorf("usage after settling = %+v, %v; want $0.75 and 1010 tokens", u, err)
		}
	})
	t.Run("ReserveIsAtomic", func(t *testing.T) {
		s, _ := open(t)
		// 40 callers at once, room for 10 of them: exactly 10 get it.
		caps := []spend.Cap{{Tokens: 105}, {}, {}}
		var granted atomic.Int64
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() {
				ok, _, err := s.Reserve(ctx, "2026-01-01", keys, caps, spend.Amount{Tokens: 10})
				if err != nil {
					t.Error(err)
				}
				if ok {
					granted.Add(1)
				}
			})
		}
		wg.Wait()
		if n := granted.Load(); n != 10 {
			t.Errorf("%d of 40 concurrent reservations of 10 tokens got a 105-token cap, want 10", n)
		}
		u, err := s.Usage(ctx, "2026-01-01", keys)
		if err != nil || u[0].Tokens != 100 {
			t.Errorf("usage = %+v, %v; want 100 tokens", u, err)
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

// near compares amounts, dollars up to float rounding.
func near(a, b spend.Amount) bool {
	d := a.USD - b.USD
	return a.Tokens == b.Tokens && d < 1e-9 && d > -1e-9
}
