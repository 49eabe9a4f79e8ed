package gateway_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/providers/faux"
)

// discardAdapter is a chat adapter that keeps nothing, so that the memory
// benchmark measures the gateway and not a fake's call log.
type discardAdapter struct {
	seq  atomic.Int64
	mu   sync.Mutex
	sink chat.Sink
	up   chan struct{}
}

func newDiscardAdapter() *discardAdapter { return &discardAdapter{up: make(chan struct{})} }

func (a *discardAdapter) Platform() chat.Platform { return "bench" }

func (a *discardAdapter) Caps(chat.ConvRef) chat.Caps {
	return chat.Caps{Dialect: chat.DialectMarkdown, MaxLen: 4000, EditInterval: 50 * time.Millisecond}
}

func (a *discardAdapter) Run(ctx context.Context, sink chat.Sink) error {
	a.mu.Lock()
	a.sink = sink
	close(a.up)
	a.mu.Unlock()
	<-ctx.Done()
	return nil
}

func (a *discardAdapter) Send(_ context.Context, conv chat.ConvRef, _ chat.Out) (chat.MsgRef, error) {
	return chat.MsgRef{Conv: conv, ID: fmt.Sprintf("b%d", a.seq.Add(1))}, nil
}

func (a *discardAdapter) Edit(context.Context, chat.MsgRef, chat.Out) error { return nil }

// inject hands in to the gateway once Run has started.
func (a *discardAdapter) inject(ctx context.Context, in chat.Inbound) error {
	<-a.up
	a.mu.Lock()
	sink := a.sink
	a.mu.Unlock()
	return sink(ctx, in)
}

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkIdleSessionMemory measures the heap a conversation costs once
// it is idle: one op creates one session (a DM, one message, one reply).
// "loaded" keeps every owner in memory (IdleEvict 1 h); "evicted" waits
// until the gateway has evicted every owner (IdleEvict 2 s). Reported:
// B/session, the live heap growth divided by the number of sessions, and
// goroutines/session, the goroutines they left running.
func BenchmarkIdleSessionMemory(b *testing.B) {
	for _, tc := range []struct {
		name  string
		evict time.Duration
	}{
		{"loaded", time.Hour},
		{"evicted", 2 * time.Second},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ad := newDiscardAdapter()
			model := newStampModel(faux.Text("ok, noted."))
			bg := startBenchGateway(b, ad, model, func(c *gateway.Config) { c.IdleEvict = tc.evict })
			// Warm up: one session, so lazily built state is not counted.
			if err := ad.inject(b.Context(), benchMessage(ad.Platform(), -1, 0, "warm up")); err != nil {
				b.Fatal(err)
			}
			bg.waitMetric(b, "pibot_run_seconds", time.Minute, func(v float64) bool { return v >= 1 })
			bg.waitMetric(b, "pibot_session_owners", time.Minute, func(v float64) bool { return tc.evict == time.Hour || v == 0 })
			before, g0 := heapInUse(), runtime.NumGoroutine()

			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						n := int(next.Add(1))
						if n > b.N {
							return
						}
						if err := ad.inject(b.Context(), benchMessage(ad.Platform(), n, n, "remember this")); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			bg.waitMetric(b, "pibot_run_seconds", time.Minute, func(v float64) bool { return v >= float64(b.N+1) })
			if tc.evict != time.Hour {
				bg.waitMetric(b, "pibot_session_owners", time.Minute, func(v float64) bool { return v == 0 })
				// Finished runs may still be settling (flush, acknowledgement):
				// wait until their goroutines are gone, and report how long
				// that took.
				t0 := time.Now()
				for runtime.NumGoroutine() > g0 && time.Since(t0) < 2*time.Minute {
					time.Sleep(10 * time.Millisecond)
				}
				b.ReportMetric(ms(time.Since(t0)), "settle-ms")
			}
			b.StopTimer()
			after, g1 := heapInUse(), runtime.NumGoroutine()
			b.ReportMetric((float64(after)-float64(before))/float64(b.N), "B/session")
			b.ReportMetric(float64(g1-g0)/float64(b.N), "goroutines/session")
			b.ReportMetric(bg.metric(b, "pibot_session_owners"), "owners")
		})
	}
}
