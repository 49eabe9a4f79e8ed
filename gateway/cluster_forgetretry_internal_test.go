package gateway

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

// forgetDedupe is a Dedupe whose Forget fails while failing is set and
// records the keys it forgot.
type forgetDedupe struct {
	Dedupe // only Forget is called

	mu        sync.Mutex
	failing   bool
	tries     int
	forgotten []string
}

func (d *forgetDedupe) Forget(_ context.Context, key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tries++
	if d.failing {
		return errors.New("forgetDedupe: down")
	}
	d.forgotten = append(d.forgotten, key)
	return nil
}

func (d *forgetDedupe) fail(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failing = on
}

func (d *forgetDedupe) state() (tries int, forgotten []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.tries, slices.Clone(d.forgotten)
}

// TestForgetRetries: a refused event's key whose Forget failed is
// forgotten once the dedupe answers, in the order queued; a redelivery
// that finds it first takes it out of the queue; nothing is queued after
// the process stops, nor beyond the limit.
func TestForgetRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  func(t *testing.T, f *forgetRetries, d *forgetDedupe, stop func())
	}{
		{"forgotten once the dedupe answers", func(t *testing.T, f *forgetRetries, d *forgetDedupe, _ func()) {
			f.add("a")
			f.add("b")
			eventually(t, "no retry while the dedupe fails", func() bool { n, _ := d.state(); return n >= 2 })
			d.fail(false)
			eventually(t, "not forgotten once the dedupe answers", func() bool { _, got := d.state(); return slices.Equal(got, []string{"a", "b"}) })
			if f.take("a") {
				t.Fatal("a forgotten key is still queued")
			}
		}},
		{"taken by its redelivery", func(t *testing.T, f *forgetRetries, d *forgetDedupe, _ func()) {
			f.add("a")
			if !f.take("a") || f.take("a") {
				t.Fatal("take does not find the queued key exactly once")
			}
		}},
		{"given up when the process stops", func(t *testing.T, f *forgetRetries, d *forgetDedupe, stop func()) {
			f.add("a")
			stop()
			if f.take("a") || f.add("a") {
				t.Fatal("queued after run stopped")
			}
		}},
		{"bounded", func(t *testing.T, _ *forgetRetries, d *forgetDedupe, _ func()) {
			b := newForgetRetries(d, slog.New(slog.DiscardHandler)) // not running: nothing leaves
			for range forgetRetryLimit {
				if !b.add("k") {
					t.Fatal("refused below the limit")
				}
			}
			if b.add("k") {
				t.Fatal("queued beyond the limit")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &forgetDedupe{failing: true}
			f := newForgetRetries(d, slog.New(slog.DiscardHandler))
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); f.run(ctx) }()
			stop := func() { cancel(); <-done }
			defer stop()
			tc.run(t, f, d, stop)
		})
	}
}
