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

// pauseKey is the key of the bot-wide pause in a tokenbucket.SharedPause, under the
// limiter's prefix.
const pauseKey = "bot"

// limiter paces outbound calls: a bucket per chat and one for the bot in
// a Rates, and a bot-wide pause after a 429 (shared by the replicas when
// the Rates is a tokenbucket.SharedPause).
type limiter struct {
	pacing Pacing
	rates  tokenbucket.Rates
	shared tokenbucket.SharedPause // nil: the pause is this process's
	prefix string                  // of the bucket keys: "telegram/<bot id>/"

	mu          sync.Mutex
	pausedUntil time.Time
}

// newLimiter paces the bot botID with rates (nil: in this process).
func newLimiter(b Pacing, rates tokenbucket.Rates, botID string) *limiter {
	if rates == nil {
		rates = tokenbucket.NewLocal(0.1)
	}
	shared, _ := rates.(tokenbucket.SharedPause)
	return &limiter{pacing: b, rates: rates, shared: shared, prefix: "telegram/" + botID + "/"}
}

// pause stops every call of the bot for d: in this process at once, and
// on the other replicas through the shared pause. An error of the shared
// pause is returned (the pause holds here regardless).
func (l *limiter) pause(ctx context.Context, d time.Duration) error {
	l.mu.Lock()
	if until := time.Now().Add(d); until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	l.mu.Unlock()
	if l.shared == nil {
		return nil
	}
	if err := l.shared.Pause(ctx, l.prefix+pauseKey, d); err != nil {
		return fmt.Errorf("shared pause: %w", err)
	}
	return nil
}

// pausedFor is how long the bot still waits in this process (a shared
// pause is asked with the tokens: acquire).
func (l *limiter) pausedFor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.pausedUntil)
}

// acquire waits until a call of mode m to chatID may go out, or returns a
// *chat.RateLimitError where m must not wait. A paced call takes a token
// of its chat and one of the bot, together; every call first waits out
// the bot's pause (the replicas' shared one in the same step).
func (l *limiter) acquire(ctx context.Context, chatID int64, m mode) error {
	if err := l.waitPause(ctx, m); err != nil {
		return err
	}
	var buckets []tokenbucket.Bucket
	if m.paced() {
		perSec, burst := l.pacing.PrivatePerSec, l.pacing.PrivateBurst
		if chatID <= 0 {
			perSec, burst = l.pacing.GroupPerMin/60, l.pacing.GroupBurst
		}
		buckets = []tokenbucket.Bucket{
			{Key: l.prefix + "chat/" + strconv.FormatInt(chatID, 10), PerSec: perSec, Burst: burst},
			{Key: l.prefix + "global", PerSec: l.pacing.GlobalPerSec, Burst: int(math.Max(1, l.pacing.GlobalPerSec))},
		}
	}
	pause := ""
	if l.shared != nil {
		pause = l.prefix + pauseKey
	}
	if len(buckets) > 0 || pause != "" {
		if err := l.take(ctx, m, pause, buckets); err != nil {
			return err
		}
	}
	// A 429 in this process may have paused the bot while this call
	// waited for tokens.
	return l.waitPause(ctx, m)
}

// waitPause waits out this process's bot-wide pause, or returns it as a
// RateLimitError where m must not wait.
func (l *limiter) waitPause(ctx context.Context, m mode) error {
	for {
		d := l.pausedFor()
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

// take waits for a token of each of buckets and for the shared pause,
// or returns the wait as a RateLimitError where m must not wait that
// long (a live call never waits out a pause).
func (l *limiter) take(ctx context.Context, m mode, pause string, buckets []tokenbucket.Bucket) error {
	for {
		d, which, err := l.rates.TakeAll(ctx, pause, buckets)
		if err != nil {
			return fmt.Errorf("pacing: %w", err)
		}
		if d <= 0 {
			return nil
		}
		scope := "bot" // the pause
		switch which { // acquire's order of the buckets
		case 0:
			scope = "chat"
		case 1:
			scope = "global"
		}
		if m.live() && (which < 0 || d > liveMaxWait) {
			return &chat.RateLimitError{RetryAfter: d, Scope: scope}
		}
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}
