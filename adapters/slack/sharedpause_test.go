package slack

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// sharedRates stands for cluster mode's Redis rates: buckets and pause
// windows that every replica given it sees.
type sharedRates struct {
	*tokenbucket.Local
	mu     sync.Mutex
	paused map[string]time.Time
}

func (r *sharedRates) Pause(_ context.Context, key string, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if until := time.Now().Add(d); until.After(r.paused[key]) {
		r.paused[key] = until
	}
	return nil
}

// TakeAll waits out pause, as the Redis rates' script does, before
// taking the buckets' tokens.
func (r *sharedRates) TakeAll(ctx context.Context, pause string, buckets []tokenbucket.Bucket) (time.Duration, int, error) {
	r.mu.Lock()
	d := time.Until(r.paused[pause])
	r.mu.Unlock()
	if pause != "" && d > 0 {
		return d, -1, nil
	}
	return r.Local.TakeAll(ctx, pause, buckets)
}

// TestRetryAfterIsSharedByReplicas: a 429 answered to one replica pauses
// the method on every replica that shares its rates, so the other
// replica makes no call of it inside the Retry-After window.
func TestRetryAfterIsSharedByReplicas(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	rates := &sharedRates{Local: tokenbucket.NewLocal(0.05), paused: map[string]time.Time{}}
	replica := func() *Adapter {
		a, err := New(Config{BotToken: secret.New(srv.BotToken), AppToken: secret.New(srv.AppToken),
			SigningSecret: secret.New(srv.SigningSecret), APIURL: srv.APIURL, Rates: rates,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := replica(), replica()
	ctx := t.Context()
	ma, err := a.Send(ctx, chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C1"}, chatOut("one"))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.Send(ctx, chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C2"}, chatOut("two"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Fail("chat.update", 1, slacktest.Fault{Kind: slacktest.Fault429, RetryAfter: 2})
	if err := a.Edit(ctx, ma, chatOut("one, edited")); !errors.Is(err, chat.ErrRateLimited) {
		t.Fatalf("edit answered 429: %v", err)
	}
	before := len(srv.CallsOf("chat.update"))
	var rl *chat.RateLimitError
	if err := b.Edit(ctx, mb, chatOut("two, edited")); !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("the other replica's edit inside the window: %v", err)
	}
	if n := len(srv.CallsOf("chat.update")); n != before {
		t.Errorf("the other replica made %d chat.update calls inside the window", n-before)
	}
	if v := srv.Violations(); len(v) > 0 {
		t.Errorf("calls inside Retry-After windows: %v", v)
	}
}
