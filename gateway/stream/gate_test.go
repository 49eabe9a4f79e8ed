package stream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/stream"
)

// TestAllowedStopsEveryPlatformCall: once Options.Allowed says no (the
// run's lease is gone), the reply makes no platform call at all on any
// surface, not a post, an edit, a draft, a status line nor its final
// delivery, and it stays silent if Allowed says yes again.
func TestAllowedStopsEveryPlatformCall(t *testing.T) {
	native := caps(4000)
	native.NativeStream = true
	appendOnly := native
	appendOnly.AppendOnly = true
	for _, tc := range []struct {
		name string
		caps chat.Caps
	}{
		{"editing messages", caps(4000)},
		{"a native stream", native},
		{"an append-only stream", appendOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := newAdapter(tc.caps)
			var allowed atomic.Bool
			allowed.Store(true)
			c := stream.New(ad, dm, stream.Options{Allowed: allowed.Load})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.Start(ctx)
			c.SetText(strings.Join(words(40), ""))
			deadline := time.Now().Add(10 * time.Second)
			for len(ad.Calls()) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the reply made no platform call while allowed")
				}
				time.Sleep(10 * time.Millisecond)
			}
			allowed.Store(false)
			before := len(ad.Calls()) // a call under way when Allowed changed may still land
			time.Sleep(20 * time.Millisecond)
			before = max(before, len(ad.Calls()))
			c.ToolStart("t1", "bash", nil)
			c.SetText(strings.Join(words(80), ""))
			time.Sleep(1500 * time.Millisecond) // past an edit interval and a status refresh
			allowed.Store(true)                 // too late: the reply lost its voice
			if _, err := c.Finish(context.Background(), chat.Out{}); err == nil {
				t.Error("Finish reported the silenced reply delivered")
			}
			if calls := ad.Calls(); len(calls) != before {
				t.Fatalf("%d platform calls after Allowed said no: %v", len(calls)-before, calls[before:])
			}
		})
	}
}
