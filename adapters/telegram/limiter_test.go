package telegram

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// sharedRates is one Rates given to several adapters, as replicas
// share the Redis one; it records the keys it was asked for.
type sharedRates struct {
	tokenbucket.Rates
	mu   sync.Mutex
	keys map[string]bool
}

func (s *sharedRates) TakeAll(ctx context.Context, pause string, buckets []tokenbucket.Bucket) (time.Duration, int, error) {
	s.mu.Lock()
	for _, b := range buckets {
		s.keys[b.Key] = true
	}
	s.mu.Unlock()
	return s.Rates.TakeAll(ctx, pause, buckets)
}

// TestInjectedBudgetIsSharedByReplicas replays two replicas of one bot
// writing to one chat at once. Each alone keeps the chat's budget, but
// only an injected shared budget keeps the two together under it: the
// fake Bot API (at the Bot FAQ numbers) answers 429 to any call over it.
func TestInjectedBudgetIsSharedByReplicas(t *testing.T) {
	rates := &sharedRates{Rates: tokenbucket.NewLocal(0.1), keys: map[string]bool{}}
	h := newHarness(t, func(c *Config) { c.Rates = rates })
	second, err := New(Config{Token: secret.New(testToken), APIURL: h.srv.URL, Rates: rates})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for r, a := range []*Adapter{h.a, second} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 {
				if _, err := a.Send(t.Context(), dm(42), chat.Out{Markdown: "r" + itoa(int64(r)) + " n" + itoa(int64(i))}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range h.srv.Calls("sendMessage") {
		if c.Code != 200 {
			t.Fatalf("a send was answered %d: the replicas together went over the chat's budget", c.Code)
		}
	}
	if n := len(h.srv.Messages(42)); n != 6 {
		t.Fatalf("%d messages, want 6", n)
	}
	for k := range rates.keys {
		if !strings.HasPrefix(k, "telegram/123456789/") || strings.Contains(k, strings.SplitN(testToken, ":", 2)[1]) {
			t.Fatalf("bucket key %q: want the bot id prefix and never the token's secret", k)
		}
	}
	if !rates.keys["telegram/123456789/chat/42"] || !rates.keys["telegram/123456789/global"] {
		t.Fatalf("keys = %v, want the chat's and the bot's bucket", rates.keys)
	}
}
