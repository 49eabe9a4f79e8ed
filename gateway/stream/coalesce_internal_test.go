package stream

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
)

// Tokens do not each wake the publishing goroutine: once the reply is
// shown, a change between two edits only updates the document, and the
// loop's timer publishes the latest text at the next edit. 1,000 tokens
// over 2 s with edits 1 s apart take a handful of loop turns, not 1,000
// goroutine hand-offs.
func TestTokensCoalesceBetweenEdits(t *testing.T) {
	edit := chat.Caps{Dialect: chat.DialectMarkdown, MaxLen: 4000, EditInterval: time.Second}
	native := edit
	native.NativeStream = true
	for _, tc := range []struct {
		name string
		caps chat.Caps
		// ticks: every reading of the clock is 1 µs later than the one
		// before, as on a real machine, where the loop sets its timer a
		// moment after the pacer notes the edit (in a synctest bubble
		// the two instants are equal).
		ticks bool
	}{
		{"edit", edit, false},
		{"native", native, false},
		{"edit,ticking clock", edit, true},
		{"native,ticking clock", native, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var opts Options
				if tc.ticks {
					var n atomic.Int64
					opts.Now = func() time.Time { return time.Now().Add(time.Duration(n.Add(1)) * time.Microsecond) }
				}
				c, ad, conv, turns := countedController(t, tc.caps, opts)
				const tokens = 1000
				var b strings.Builder
				for i := range tokens {
					fmt.Fprintf(&b, "w%d ", i)
					c.SetText(b.String())
					time.Sleep(2 * time.Millisecond)
				}
				if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
					t.Fatal(err)
				}
				if got := ad.Messages(conv); len(got) == 0 || !strings.HasSuffix(got[len(got)-1], "w999") {
					t.Fatalf("final message = %q", got)
				}
				// The first post waits for a few tokens (each may post it);
				// then one turn per edit and per typing refresh.
				if n := turns.Load(); n > 20 {
					t.Errorf("%d loop turns for %d tokens over 2 s of 1 s edits: tokens are handed to the loop one by one", n, tokens)
				}
			})
		})
	}
}

// Before the first post, tokens too short to post it do not each wake the
// publishing goroutine: it sleeps until the post is due by time, and the
// token that makes the text long enough wakes it. Twenty 1-character
// tokens, 10 ms apart, take a few loop turns, then the 24th character
// posts at once.
func TestTokensBeforeFirstPostCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, ad, conv, turns := countedController(t, chat.Caps{Dialect: chat.DialectMarkdown, MaxLen: 4000, EditInterval: time.Second}, Options{})
		start := time.Now()
		var b strings.Builder
		for range firstPostChars - 1 {
			b.WriteString("a")
			c.SetText(b.String())
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
		}
		if n := len(ad.Messages(conv)); n != 0 {
			t.Fatalf("%d messages posted for %d characters", n, b.Len())
		}
		// The first turn, the first token's (it starts the wait) and
		// perhaps one more as the loop goes to sleep.
		if n := turns.Load(); n > 3 {
			t.Errorf("%d loop turns for %d tokens before the first post: each token wakes the loop", n, b.Len())
		}
		b.WriteString("a")
		c.SetText(b.String())
		synctest.Wait()
		if got := ad.Messages(conv); len(got) != 1 || !strings.HasPrefix(got[0], b.String()) {
			t.Fatalf("after %d characters: messages %q, want the text posted", b.Len(), got)
		}
		if el := time.Since(start); el >= firstPostDelay {
			t.Errorf("first post after %s: it waited for the delay, not for the length", el)
		}
		if _, err := c.Finish(t.Context(), chat.Out{}); err != nil {
			t.Fatal(err)
		}
	})
}

// countedController starts a Controller with opts on a chattest adapter
// with caps, counting the turns of its loop. It runs inside the caller's synctest
// bubble, so its goroutine is the bubble's.
func countedController(t *testing.T, caps chat.Caps, opts Options) (*Controller, *chattest.Adapter, chat.ConvRef, *atomic.Int64) {
	t.Helper()
	ad := chattest.New(chattest.WithCaps(caps, caps))
	conv := chat.ConvRef{Platform: "test", Channel: "1", DM: true}
	c := New(ad, conv, opts)
	turns := new(atomic.Int64)
	c.r.mu.Lock()
	c.r.started = true
	c.r.mu.Unlock()
	go c.loop.run(t.Context(), c.now, func(ctx context.Context) time.Duration {
		turns.Add(1)
		return c.out.step(ctx)
	})
	return c, ad, conv, turns
}
