package web

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/chat"
)

// discardBus is a bus whose publishes go nowhere: what a benchmark
// measures is the adapter's side of relaying.
type discardBus struct{}

func (discardBus) Publish(context.Context, []byte) error { return nil }

func (discardBus) Subscribe(ctx context.Context, _ func([]byte)) error {
	<-ctx.Done()
	return nil
}

// BenchmarkEdit is the cost of one streaming edit of a 2,000-character
// reply: alone (one process) and relayed to the other replicas (the
// event's encoding, queueing and the publisher's loop; the bus discards).
func BenchmarkEdit(b *testing.B) {
	for _, bc := range []struct {
		name string
		bus  Bus
	}{{"alone", nil}, {"relayed", discardBus{}}} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := New(Config{Bus: bc.bus})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { _ = a.Run(ctx, func(context.Context, chat.Inbound) error { return nil }) })
			defer func() { cancel(); wg.Wait() }()
			ref, err := a.Send(ctx, conv("c1", ""), chat.Out{Markdown: "x"})
			if err != nil {
				b.Fatal(err)
			}
			texts := [2]string{strings.Repeat("word ", 400), strings.Repeat("text ", 400)}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := a.Edit(ctx, ref, chat.Out{Markdown: texts[i%2]}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
