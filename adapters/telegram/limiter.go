package telegram

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// liveMaxWait is the longest a live call (edit, draft) waits for its chat's
// token; a longer wait is returned as a RateLimitError instead.
const liveMaxWait = 1500 * time.Millisecond

// Rates holds the token buckets that pace outbound calls (Config.Rates).
// The default keeps them in this process; in cluster mode the replicas
// share one (cluster's Redis rates), so a bot's pace is not spent once
// per replica. cluster.Rates is the in-process implementation.
type Rates interface {
	// Take takes one token from key's bucket, which refills at perSec
	// tokens a second up to burst, and returns 0; when the bucket has none
	// it takes nothing and returns how long until it will have one.
	Take(ctx context.Context, key string, perSec float64, burst int) (time.Duration, error)
}

// limiter paces outbound calls: a bucket per chat and one for the bot in
// a Rates, and a bot-wide pause after a 429.
type limiter struct {
	pacing Pacing
	rates  Rates
	prefix string // of the bucket keys: "telegram/<bot id>/"

	mu          sync.Mutex
	pausedUntil time.Time
}

// newLimiter paces the bot botID with rates (nil: in this process).
func newLimiter(b Pacing, rates Rates, botID string) *limiter {
	if rates == nil {
		rates = tokenbucket.NewLocal(0.1)
	}
	return &limiter{pacing: b, rates: rates, prefix: "telegram/" + botID + "/"}
}

// pause stops every call of the bot for d.
func (l *limiter) pause(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := time.Now().Add(d); until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
}

// acquire waits until a call of mode m to chatID may go out, or returns a
// *chat.RateLimitError where m must not wait. A paced call takes a
// token of its chat, then one of the bot.
func (l *limiter) acquire(ctx context.Context, chatID int64, m mode) error {
	if err := l.waitPause(ctx, m); err != nil {
		return err
	}
	if !m.paced() {
		return nil
	}
	perSec, burst := l.pacing.PrivatePerSec, l.pacing.PrivateBurst
	if chatID <= 0 {
		perSec, burst = l.pacing.GroupPerMin/60, l.pacing.GroupBurst
	}
	if err := l.take(ctx, m, "chat/"+strconv.FormatInt(chatID, 10), perSec, burst, "chat"); err != nil {
		return err
	}
	if err := l.take(ctx, m, "global", l.pacing.GlobalPerSec, int(math.Max(1, l.pacing.GlobalPerSec)), "global"); err != nil {
		return err
	}
	// A 429 may have paused the bot while this call waited for tokens.
	return l.waitPause(ctx, m)
}

// waitPause waits out a bot-wide pause, or returns it as a RateLimitError
// where m must not wait.
func (l *limiter) waitPause(ctx context.Context, m mode) error {
	for {
		l.mu.Lock()
		d := time.Until(l.pausedUntil)
		l.mu.Unlock()
		if d <= 0 {
			return nil
		}
		if m.live() {
			return &chat.RateLimitError{RetryAfter: d, Scope: "bot"}
		}
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}

// take waits for a token of the bucket key, or returns the wait as a
// RateLimitError of scope where m must not wait that long.
func (l *limiter) take(ctx context.Context, m mode, key string, perSec float64, burst int, scope string) error {
	for {
		d, err := l.rates.Take(ctx, l.prefix+key, perSec, burst)
		if err != nil {
			return fmt.Errorf("pacing: %w", err)
		}
		if d <= 0 {
			return nil
		}
		if m.live() && d > liveMaxWait {
			return &chat.RateLimitError{RetryAfter: d, Scope: scope}
		}
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}
