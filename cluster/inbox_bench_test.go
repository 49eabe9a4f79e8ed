package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster"
)

// BenchmarkInboxRestart is issue #34's restart through the inbox: a
// process delivers n messages (about 590 bytes of item each: enqueued,
// taken, begun, acknowledged) and crashes with one still pending; one op
// opens the file it left. Reported: open-ms, open-MB (bytes allocated
// by the open) and file-MB (the file the open reads).
func BenchmarkInboxRestart(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("messages=%dk", n/1000), func(b *testing.B) {
			dir := b.TempDir()
			src := filepath.Join(dir, "history.jsonl")
			ib, err := cluster.OpenInbox(src)
			if err != nil {
				b.Fatal(err)
			}
			data := []byte(fmt.Sprintf(`{"text":"%0540d"}`, 0))
			for i := range n {
				id, _, err := ib.Enqueue(b.Context(), "k", data)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ib.Consume(b.Context(), "k"); err != nil {
					b.Fatal(err)
				}
				if err := ib.Begin(b.Context(), "k", id); err != nil {
					b.Fatal(err)
				}
				if i < n-1 {
					if err := ib.Ack(b.Context(), "k", id); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := ib.Sync(); err != nil {
				b.Fatal(err)
			}
			history, err := os.ReadFile(src)
			if err != nil {
				b.Fatal(err)
			}
			var openTime time.Duration
			var alloc uint64
			for i := 0; b.Loop(); i++ {
				p := filepath.Join(dir, fmt.Sprintf("inbox%d.jsonl", i))
				b.StopTimer()
				if err := os.WriteFile(p, history, 0o600); err != nil {
					b.Fatal(err)
				}
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				b.StartTimer()
				t0 := time.Now()
				ib, err := cluster.OpenInbox(p)
				openTime += time.Since(t0)
				runtime.ReadMemStats(&m1)
				alloc += m1.TotalAlloc - m0.TotalAlloc
				if err != nil {
					b.Fatal(err)
				}
				if ib.Len() != 1 {
					b.Fatalf("%d items pending, want 1", ib.Len())
				}
				_ = ib.Close()
			}
			b.ReportMetric(float64(openTime.Microseconds())/1e3/float64(b.N), "open-ms")
			b.ReportMetric(float64(alloc)/1e6/float64(b.N), "open-MB")
			b.ReportMetric(float64(len(history))/1e6, "file-MB")
		})
	}
}
