package backoff_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/internal/backoff"
)

func TestExp(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		base  time.Duration
		n     int
		limit time.Duration
		want  time.Duration
	}{
		{"first retry waits base", 2 * s, 1, 0, 2 * s},
		{"doubles", 2 * s, 3, 0, 8 * s},
		{"n below 1 counts as 1", s, 0, time.Minute, s},
		{"negative n", s, -4, time.Minute, s},
		{"capped", s, 10, time.Minute, time.Minute},
		{"exactly at the cap", s, 7, 64 * s, 64 * s},
		{"just under the cap", s, 6, 64 * s, 32 * s},
		{"base above the cap", 2 * time.Minute, 1, time.Minute, time.Minute},
		{"huge n with a cap does not overflow", s, 1000, time.Minute, time.Minute},
		{"huge n without a cap saturates", s, 1000, 0, math.MaxInt64},
		{"zero base", 0, 5, time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoff.Exp(tt.base, tt.n, tt.limit); got != tt.want {
				t.Errorf("Exp(%v, %d, %v) = %v, want %v", tt.base, tt.n, tt.limit, got, tt.want)
			}
		})
	}
}

// TestExpMatchesShift: within range, Exp is the shift the call sites wrote
// by hand (base << (n-1), capped).
func TestExpMatchesShift(t *testing.T) {
	for _, base := range []time.Duration{time.Millisecond, 250 * time.Millisecond, time.Second, 5 * time.Second} {
		for n := 1; n <= 20; n++ {
			limit := 10 * time.Minute
			if got, want := backoff.Exp(base, n, limit), min(base<<(n-1), limit); got != want {
				t.Errorf("Exp(%v, %d) = %v, want %v", base, n, got, want)
			}
			if got, want := backoff.Exp(base, n, 0), base<<(n-1); got != want {
				t.Errorf("Exp(%v, %d, no cap) = %v, want %v", base, n, got, want)
			}
		}
	}
}

func TestJitter(t *testing.T) {
	tests := []struct {
		d        time.Duration
		lo, hi   time.Duration
		varies   bool
		describe string
	}{
		{time.Second, time.Second, time.Second + 200*time.Millisecond, true, "up to a fifth more"},
		{4, 4, 4, false, "too small to add to"},
		{0, 0, 0, false, "zero stays zero"},
		{-time.Second, -time.Second, -time.Second, false, "negative is returned as is"},
	}
	for _, tt := range tests {
		t.Run(tt.describe, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for range 200 {
				got := backoff.Jitter(tt.d)
				if got < tt.lo || got > tt.hi {
					t.Fatalf("Jitter(%v) = %v, want within [%v, %v]", tt.d, got, tt.lo, tt.hi)
				}
				seen[got] = true
			}
			if tt.varies && len(seen) < 2 {
				t.Errorf("Jitter(%v) gave one value in 200 draws", tt.d)
			}
		})
	}
}

func TestSleep(t *testing.T) {
	tests := []struct {
		name    string
		d       time.Duration
		cancel  time.Duration // cancel ctx after this (0: never; <0: before)
		want    error
		elapsed time.Duration
	}{
		{"waits d", time.Minute, 0, nil, time.Minute},
		{"ends with its context", time.Hour, 3 * time.Second, context.Canceled, 3 * time.Second},
		{"already cancelled", time.Hour, -1, context.Canceled, 0},
		{"zero d returns at once", 0, 0, nil, 0},
		{"zero d, cancelled", 0, -1, context.Canceled, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				switch {
				case tt.cancel < 0:
					cancel()
				case tt.cancel > 0:
					time.AfterFunc(tt.cancel, cancel)
				}
				start := time.Now()
				err := backoff.Sleep(ctx, tt.d)
				if !errors.Is(err, tt.want) {
					t.Errorf("Sleep = %v, want %v", err, tt.want)
				}
				if got := time.Since(start); got != tt.elapsed {
					t.Errorf("slept %v, want %v", got, tt.elapsed)
				}
			})
		})
	}
}
