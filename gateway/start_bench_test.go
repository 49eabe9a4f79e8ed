package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// BenchmarkServeStart is issue #34's start-up figure: a gateway starts on
// a data directory whose one session file holds 1k or 100k entries
// (writeLongSession, a compaction every 1,000), with its location index
// (index=kept) or without it (index=rebuilt: the bindings are read from
// the session files, as after index.jsonl was lost, or by a cluster's
// first replica). One op: gateway.New until Ready, then a stop. Reported:
// ready-ms, the time to Ready, and start-MB, the bytes allocated
// meanwhile.
func BenchmarkServeStart(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		for _, index := range []string{"kept", "rebuilt"} {
			b.Run(fmt.Sprintf("entries=%dk/index=%s", n/1000, index), func(b *testing.B) {
				benchServeStart(b, n, index == "rebuilt")
			})
		}
	}
}

func benchServeStart(b *testing.B, n int, rebuild bool) {
	dir := b.TempDir()
	conv := benchMessage(newDiscardAdapter().Platform(), 0, 0, "").Conv
	writeLongSession(b, filepath.Join(dir, "sessions", "long.jsonl"), n, 1000, conv.Key())
	model := newStampModel(faux.Text("ok"))
	start := func() (ready time.Duration, allocated uint64) {
		a0, t0 := totalAlloc(), time.Now()
		g, _, inbox := newLongGateway(b, dir, newDiscardAdapter(), model, func(*gateway.Config) {})
		defer inbox.Close()
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		select {
		case <-g.Ready():
		case err := <-done:
			b.Fatalf("gateway.Run before Ready: %v", err)
		}
		ready, allocated = time.Since(t0), totalAlloc()-a0
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return ready, allocated
	}
	start() // writes the index
	var ready, allocated float64
	b.ResetTimer()
	for range b.N {
		if rebuild {
			b.StopTimer()
			if err := os.Remove(filepath.Join(dir, "index.jsonl")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		d, a := start()
		ready += ms(d)
		allocated += float64(a)
	}
	b.StopTimer()
	b.ReportMetric(ready/float64(b.N), "ready-ms")
	b.ReportMetric(allocated/float64(b.N)/1e6, "start-MB")
}

// BenchmarkHistory is what the web chat's history costs on a long
// conversation: its transcript (a page reload: GET /api/history) and the
// list of conversations (GET /api/conversations), rebuilt from a session
// file of 1k or 100k entries (writeLongSession, a compaction every
// 1,000). owner=none: the session is not loaded (a gateway just
// started); each op starts a gateway and reads the transcript (first),
// again (again: what is kept of the first read serves) and the list.
// owner=loaded: a message loaded the session; each op reads the
// transcript and the list. Reported: the time and the bytes allocated of
// each read.
func BenchmarkHistory(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		for _, loaded := range []bool{false, true} {
			owner := "none"
			if loaded {
				owner = "loaded"
			}
			b.Run(fmt.Sprintf("entries=%dk/owner=%s", n/1000, owner), func(b *testing.B) {
				benchHistory(b, n, loaded)
			})
		}
	}
}

func benchHistory(b *testing.B, n int, loaded bool) {
	dir := b.TempDir()
	conv := benchMessage(newDiscardAdapter().Platform(), 0, 0, "").Conv
	writeLongSession(b, filepath.Join(dir, "sessions", "long.jsonl"), n, 1000, conv.Key())
	model := newStampModel(faux.Text("ok, noted.").WithUsage(llm.Usage{Input: 100, Output: 3, TotalTokens: 103}))
	start := func() (chat.History, *benchGateway) {
		ad := &historyDiscard{discardAdapter: newDiscardAdapter()}
		g, reg, inbox := newLongGateway(b, dir, ad, model, func(c *gateway.Config) { c.IdleEvict = time.Hour })
		bg := runBenchGateway(b, g, reg, inbox.Len, func() { inbox.Close() })
		<-g.Ready()
		if loaded {
			w := model.expect("hello")
			if err := ad.inject(b.Context(), benchMessage(ad.Platform(), 0, 1, "hello")); err != nil {
				b.Fatal(err)
			}
			<-w.ended
			bg.waitMetric(b, "pibot_run_seconds", time.Minute, func(v float64) bool { return v >= 1 })
		}
		return ad.history(), bg
	}
	read := func(f func() error) (float64, float64) {
		a0, t0 := totalAlloc(), time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		return ms(time.Since(t0)), float64(totalAlloc() - a0)
	}
	transcript := func(h chat.History) func() error {
		return func() error {
			tr, err := h.Transcript(b.Context(), conv)
			if err == nil && len(tr.Messages) == 0 {
				err = errors.New("an empty transcript")
			}
			return err
		}
	}
	list := func(h chat.History) func() error {
		return func() error {
			l, err := h.Conversations(b.Context(), 50)
			if err == nil && len(l) != 1 {
				err = fmt.Errorf("%d conversations listed, want 1", len(l))
			}
			return err
		}
	}
	var trMS, trB, againMS, againB, listMS, listB float64
	var h chat.History
	var bg *benchGateway
	if loaded {
		h, bg = start()
	}
	b.ResetTimer()
	for range b.N {
		if !loaded {
			b.StopTimer()
			h, bg = start()
			b.StartTimer()
		}
		d, a := read(transcript(h))
		trMS, trB = trMS+d, trB+a
		if !loaded {
			d, a = read(transcript(h))
			againMS, againB = againMS+d, againB+a
		}
		d, a = read(list(h))
		listMS, listB = listMS+d, listB+a
		if !loaded {
			b.StopTimer()
			if err := bg.stop(); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	N := float64(b.N)
	b.ReportMetric(trMS/N, "transcript-ms")
	b.ReportMetric(trB/N/1e6, "transcript-MB")
	if !loaded {
		b.ReportMetric(againMS/N, "again-ms")
		b.ReportMetric(againB/N/1e6, "again-MB")
	}
	b.ReportMetric(listMS/N, "list-ms")
	b.ReportMetric(listB/N/1e6, "list-MB")
}

// historyDiscard is the discarding adapter plus chat.HistoryUser.
type historyDiscard struct {
	*discardAdapter
	mu sync.Mutex
	h  chat.History
}

func (a *historyDiscard) UseHistory(h chat.History) {
	a.mu.Lock()
	a.h = h
	a.mu.Unlock()
}

func (a *historyDiscard) history() chat.History {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.h
}
