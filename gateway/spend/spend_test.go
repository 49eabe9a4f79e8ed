package spend_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/gateway/spend/spendtest"
)

func TestFileStore(t *testing.T) {
	spendtest.RunStoreTests(t, func(t *testing.T) (spend.Store, func() spend.Store) {
		path := filepath.Join(t.TempDir(), "spend.json")
		s, err := spend.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, func() spend.Store {
			// A restart: pibot stops (writing what waits), then starts.
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := spend.OpenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	})
}

func TestFileStoreDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spend.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := spend.OpenFile(path)
	if err == nil || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged file: err = %v, want one naming the file", err)
	}
}

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func newLimiter(t *testing.T, caps spend.Caps, c *clock) (*spend.Limiter, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spend.json")
	s, err := spend.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return spend.NewLimiter(s, caps, c.now), path
}

func refusal(t *testing.T, err error) *spend.Refusal {
	t.Helper()
	var r *spend.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	return r
}

func TestLimiterCaps(t *testing.T) {
	ctx := context.Background()
	alice := spend.Who{User: "telegram:1", Conv: "telegram:c1"}
	bob := spend.Who{User: "telegram:2", Conv: "telegram:c1"}
	carol := spend.Who{User: "telegram:3", Conv: "telegram:c2"}
	tests := []struct {
		name  string
		caps  spend.Caps
		spend []struct {
			who spend.Who
			a   spend.Amount
		}
		check  spend.Who
		scope  spend.Scope // "" : allowed
		usd    bool
		inText []string
	}{
		{name: "no caps", spend: []struct {
			who spend.Who
			a   spend.Amount
		}{{alice, spend.Amount{USD: 100, Tokens: 1e9}}}, check: alice},
		{name: "user usd reached", caps: spend.Caps{PerUser: spend.Cap{USD: 1}},
			spend: []struct {
				who spend.Who
				a   spend.Amount
			}{{alice, spend.Amount{USD: 0.6}}, {alice, spend.Amount{USD: 0.4}}},
			check: alice, scope: spend.PerUser, usd: true, inText: []string{"limits.per_user.daily_usd", "$1.00 of $1.00", "00:00 UTC", "in 9h30m"}},
		{name: "user below cap", caps: spend.Caps{PerUser: spend.Cap{USD: 1}},
			spend: []struct {
				who spend.Who
				a   spend.Amount
			}{{alice, spend.Amount{USD: 0.99}}}, check: alice},
		{name: "other user unaffected", caps: spend.Caps{PerUser: spend.Cap{USD: 1}},
			spend: []struct {
				who spend.Who
				a   spend.Amount
			}{{alice, spend.Amount{USD: 5}}}, check: bob},
		{name: "conversation tokens shared by its users", caps: spend.Caps{PerConversation: spend.Cap{Tokens: 1000}},
			spend: []struct {
				who spend.Who
				a   spend.Amount
			}{{alice, spend.Amount{Tokens: 600}}, {bob, spend.Amount{Tokens: 400}}},
			check: bob, scope: spend.PerConversation, inText: []string{"limits.per_conversation.daily_tokens", "1000 of 1000 tokens", "this conversation"}},
		{name: "global counts everyone", caps: spend.Caps{Global: spend.Cap{USD: 2}},
			spend: []struct {
				who spend.Who
				a   spend.Amount
			}{{alice, spend.Amount{USD: 1}}, {carol, spend.Amount{USD: 1}}},
			check: bob, scope: spend.Global, usd: true, inText: []string{"limits.global.daily_usd", "whole bot"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Date(2026, 3, 4, 14, 30, 0, 0, time.UTC)}
			l, _ := newLimiter(t, tc.caps, c)
			for _, s := range tc.spend {
				if err := l.Record(ctx, s.who, s.a); err != nil {
					t.Fatal(err)
				}
			}
			err := l.Check(ctx, tc.check)
			if tc.scope == "" {
				if err != nil {
					t.Fatalf("Check = %v, want allowed", err)
				}
				return
			}
			r := refusal(t, err)
			if r.Scope != tc.scope || r.USD != tc.usd {
				t.Errorf("refusal %+v, want scope %s usd %v", r, tc.scope, tc.usd)
			}
			if want := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC); !r.ResetsAt.Equal(want) {
				t.Errorf("resets at %v, want %v", r.ResetsAt, want)
			}
			for _, w := range tc.inText {
				if !strings.Contains(r.Error(), w) {
					t.Errorf("message %q lacks %q", r.Error(), w)
				}
			}
		})
	}
}

// TestLimiterResetsAtUTCMidnight: the count is per UTC day, whatever the
// clock's zone.
func TestLimiterResetsAtUTCMidnight(t *testing.T) {
	ctx := context.Background()
	w := spend.Who{User: "slack:U1", Conv: "slack:T1:C1"}
	east := time.FixedZone("UTC+3", 3*3600)
	c := &clock{t: time.Date(2026, 3, 5, 2, 59, 0, 0, east)} // 23:59 UTC on the 4th
	l, _ := newLimiter(t, spend.Caps{PerUser: spend.Cap{Tokens: 10}}, c)
	if err := l.Record(ctx, w, spend.Amount{Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	r := refusal(t, l.Check(ctx, w))
	if r.ResetsIn != time.Minute {
		t.Errorf("resets in %v, want 1m", r.ResetsIn)
	}
	c.set(time.Date(2026, 3, 5, 3, 0, 0, 0, east)) // 00:00 UTC on the 5th
	if err := l.Check(ctx, w); err != nil {
		t.Fatalf("after UTC midnight: %v, want allowed", err)
	}
}

func TestLimiterOverridesAndRestart(t *testing.T) {
	ctx := context.Background()
	w := spend.Who{User: "discord:9", Conv: "discord:g:ch"}
	c := &clock{t: time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)}
	caps := spend.Caps{PerUser: spend.Cap{USD: 1}, Global: spend.Cap{Tokens: 1000}}
	l, path := newLimiter(t, caps, c)
	if err := l.Record(ctx, w, spend.Amount{USD: 1, Tokens: 200}); err != nil {
		t.Fatal(err)
	}
	refusal(t, l.Check(ctx, w))
	// Raised for today.
	if err := l.Override(ctx, w, spend.PerUser, spend.Override{Cap: spend.Cap{USD: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(ctx, w); err != nil {
		t.Fatalf("raised cap: %v", err)
	}
	// The count and the raise survive a restart.
	s2, err := spend.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l2 := spend.NewLimiter(s2, caps, c.now)
	if err := l2.Record(ctx, w, spend.Amount{USD: 2, Tokens: 800}); err != nil {
		t.Fatal(err)
	}
	r := refusal(t, l2.Check(ctx, w))
	if r.Scope != spend.PerUser || r.Used.USD != 3 {
		t.Errorf("after restart: %+v, want the raised user cap reached at $3", r)
	}
	if err := l2.Override(ctx, w, spend.PerUser, spend.Override{Lifted: true}); err != nil {
		t.Fatal(err)
	}
	if r := refusal(t, l2.Check(ctx, w)); r.Scope != spend.Global {
		t.Errorf("user cap lifted: refusal %+v, want the global token cap", r)
	}
	rep, err := l2.Report(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"per_user (for you): $3.0000, 1000 tokens; cap lifted for today", "global (for the whole bot): $3.0000, 1000 tokens; cap 1000 tokens", "resets at 00:00 UTC, in 14h00m"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	// The next day the override is gone and the count starts at zero.
	c.set(time.Date(2026, 3, 5, 0, 0, 1, 0, time.UTC))
	if err := l2.Check(ctx, w); err != nil {
		t.Fatalf("next day: %v", err)
	}
	if err := l2.Record(ctx, w, spend.Amount{USD: 1}); err != nil {
		t.Fatal(err)
	}
	if r := refusal(t, l2.Check(ctx, w)); r.Scope != spend.PerUser || r.Cap.USD != 1 {
		t.Errorf("next day: %+v, want the configured $1 cap again", r)
	}
	// A reload changes the caps, not the counts.
	l2.SetCaps(spend.Caps{PerUser: spend.Cap{USD: 5}})
	if err := l2.Check(ctx, w); err != nil {
		t.Fatalf("after SetCaps: %v", err)
	}
}

func TestParseScope(t *testing.T) {
	for in, want := range map[string]spend.Scope{"user": spend.PerUser, "conv": spend.PerConversation, "Conversation": spend.PerConversation, "global": spend.Global, "per_user": spend.PerUser} {
		if got, ok := spend.ParseScope(in); !ok || got != want {
			t.Errorf("ParseScope(%q) = %q %v", in, got, ok)
		}
	}
	if _, ok := spend.ParseScope("everyone"); ok {
		t.Error("ParseScope accepted an unknown scope")
	}
}

// Counts are not written on every model answer (that was an atomic file
// replacement with two fsyncs each, under one lock for every
// conversation), yet they reach the file within flushAfter, without a
// clean stop.
func TestFileStoreWritesCountsInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "spend.json")
		s, err := spend.OpenFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		keys := []string{"user:a", "global"}
		for range 100 {
			if err := s.Add(ctx, "2026-03-04", keys, spend.Amount{Tokens: 10}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the counts were written at once (%v), want one write later", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		crashed, err := spend.OpenFile(path) // no Close: as after a crash
		if err != nil {
			t.Fatal(err)
		}
		u, err := crashed.Usage(ctx, "2026-03-04", keys)
		if err != nil || u[0].Tokens != 1000 || u[1].Tokens != 1000 {
			t.Fatalf("counts in the file after the write = %v, %v; want 1000 tokens each", u, err)
		}
	})
}

// TestLimiterReserveAndSettle: a model call's estimate is held against the
// caps before the call and replaced by what it used after; a call whose
// estimate would pass a cap is refused with a message that says so, and
// holds nothing.
func TestLimiterReserveAndSettle(t *testing.T) {
	ctx := context.Background()
	w := spend.Who{User: "telegram:1", Conv: "telegram:c1"}
	other := spend.Who{User: "telegram:2", Conv: "telegram:c1"}
	c := &clock{t: time.Date(2026, 3, 4, 14, 30, 0, 0, time.UTC)}
	l, _ := newLimiter(t, spend.Caps{PerUser: spend.Cap{Tokens: 1000}, PerConversation: spend.Cap{USD: 1}}, c)
	usage := func(who spend.Who) string {
		rep, err := l.Report(ctx, who)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	h1, err := l.Reserve(ctx, w, spend.Amount{Tokens: 600, USD: 0.1})
	if err != nil {
		t.Fatalf("first reservation: %v", err)
	}
	// Held: a second call of 600 does not fit while the first is in flight.
	r := refusal(t, func() error { _, err := l.Reserve(ctx, w, spend.Amount{Tokens: 600}); return err }())
	if r.Scope != spend.PerUser || r.USD || r.Next.Tokens != 600 || r.Used.Tokens != 600 {
		t.Errorf("refusal %+v, want the user's token cap with 600 used and 600 asked", r)
	}
	for _, want := range []string{"limits.per_user.daily_tokens", "leaves no room for the next model call", "600 of 1000 tokens", "about 600 tokens", "in 9h30m"} {
		if !strings.Contains(r.Error(), want) {
			t.Errorf("message %q lacks %q", r.Error(), want)
		}
	}
	// The first call used less than held: the rest is given back.
	if err := l.Settle(ctx, h1, spend.Amount{Tokens: 350, USD: 0.05}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(usage(w), "per_user (for you): $0.0500, 350 tokens") {
		t.Errorf("after settling: %s", usage(w))
	}
	h2, err := l.Reserve(ctx, w, spend.Amount{Tokens: 600})
	if err != nil {
		t.Fatalf("a call that fits after settling: %v", err)
	}
	// The dollar cap of the conversation binds another user too.
	r = refusal(t, func() error { _, err := l.Reserve(ctx, other, spend.Amount{USD: 0.96}); return err }())
	if r.Scope != spend.PerConversation || !r.USD || !strings.Contains(r.Error(), "about $0.96") {
		t.Errorf("refusal %+v (%s), want the conversation's dollar cap", r, r.Error())
	}
	// A call that used more than held counts in full.
	if err := l.Settle(ctx, h2, spend.Amount{Tokens: 900}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(usage(w), "per_user (for you): $0.0500, 1250 tokens") {
		t.Errorf("after the second call: %s", usage(w))
	}
	if err := l.Check(ctx, w); err == nil {
		t.Error("Check lets a run start past the cap")
	}
	// Lifted caps: none in force, nothing held, the usage is counted after.
	for _, s := range []spend.Scope{spend.PerUser, spend.PerConversation} {
		if err := l.Override(ctx, w, s, spend.Override{Lifted: true}); err != nil {
			t.Fatal(err)
		}
	}
	h3, err := l.Reserve(ctx, w, spend.Amount{Tokens: 5000})
	if err != nil || h3.Amount() != (spend.Amount{}) {
		t.Fatalf("reservation under a lifted cap = %+v, %v; want nothing held", h3.Amount(), err)
	}
	if err := l.Settle(ctx, h3, spend.Amount{Tokens: 10}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(usage(w), "per_user (for you): $0.0500, 1260 tokens") {
		t.Errorf("after a call under a lifted cap: %s", usage(w))
	}
}
