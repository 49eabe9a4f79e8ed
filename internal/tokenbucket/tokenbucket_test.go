package tokenbucket

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTake(t *testing.T) {
	tests := []struct {
		name   string
		perSec float64
		burst  int
		takes  int // takes that must be granted at once
	}{
		{"burst then wait", 1, 3, 3},
		{"no limit", 0, 0, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewLocal(0.1)
			for i := range tt.takes {
				if d, err := r.Take(context.Background(), "k", tt.perSec, tt.burst); d != 0 || err != nil {
					t.Fatalf("take %d: wait %s, %v; want granted", i, d, err)
				}
			}
			if tt.perSec <= 0 {
				return
			}
			d, _ := r.Take(context.Background(), "k", tt.perSec, tt.burst)
			if want := time.Duration(float64(time.Second) / tt.perSec); d < want || d > want*12/10 {
				t.Fatalf("wait after the burst = %s, want about %s plus the margin", d, want)
			}
			if d, _ := r.Take(context.Background(), "other", tt.perSec, tt.burst); d != 0 {
				t.Fatalf("another key waits %s: buckets are per key", d)
			}
		})
	}
}

func TestFullBucketsAreDroppedBeyondTheBound(t *testing.T) {
	r := NewLocal(0)
	for i := range maxBuckets + 10 {
		_, _ = r.Take(context.Background(), string(rune(i+1)), 1e9, 1)
	}
	if n := len(r.buckets); n > maxBuckets+1 {
		t.Fatalf("%d buckets kept, want at most %d", n, maxBuckets+1)
	}
}

func TestWait(t *testing.T) {
	if err := Wait(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("a wait that ran out: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose context ended: %v, want context.Canceled", err)
	}
}
