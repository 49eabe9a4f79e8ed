package chattest

import (
	"context"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// TestInjectDoesNotWaitForTheCallLog: an event is handed to the sink while
// the adapter records other calls (it held the same lock, so at 1,000
// streaming replies an inbound message waited behind their edits).
func TestInjectDoesNotWaitForTheCallLog(t *testing.T) {
	a := New()
	got := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx, func(_ context.Context, in chat.Inbound) error { got <- in.Text; return nil })
	a.mu.Lock() // a Send or Edit being recorded
	defer a.mu.Unlock()
	go a.Inject(ctx, chat.Inbound{Kind: chat.KindMessage, Text: "hi"})
	select {
	case text := <-got:
		if text != "hi" {
			t.Fatalf("sink got %q", text)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Inject waited for the call log's lock")
	}
}
