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

// SharedPause is a Rates whose pause windows every replica sees (cluster
// mode's Redis rates): a 429 answered to one replica makes the bot's
// calls on every replica wait out its retry_after. Rates without it pause
// only this process.
type SharedPause interface {
	// Pause makes key wait d on every replica, unless it already waits
	// longer.
	Pause(ctx context.Context, key string, d time.Duration) error
	// PausedFor returns how long key still waits (0: not paused).
	PausedFor(ctx context.Context, key string) (time.Duration, error)
}

// pauseKey is the key of the bot-wide pause in a SharedPause, under the
// limiter's prefix.
const pauseKey = "bot"

// limiter paces outbound calls: a bucket per chat and one for the bot in
// a Rates, and a bot-wide pause after a 429 (shared by the replicas when
// the Rates is a SharedPause).
type limiter struct {
	pacing Pacing
	rates  Rates
	shared SharedPause // nil: the pause is this process's
	prefix string      // of the bucket keys: "telegram/<bot id>/"

	mu          sync.Mutex
	pausedUntil time.Time
}

// newLimiter paces the bot botID with rates (nil: in this process).
func newLimiter(b Pacing, rates Rates, botID string) *limiter {
	if rates == nil {
		rates = tokenbucket.NewLocal(0.1)
	}
	shared, _ := rates.(SharedPause)
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

// pausedFor is how long the bot still waits: the longer of this process's
// pause and, when ask is set, the shared one.
func (l *limiter) pausedFor(ctx context.Context, ask bool) (time.Duration, error) {
	l.mu.Lock()
	d := time.Until(l.pausedUntil)
	l.mu.Unlock()
	if !ask || l.shared == nil {
		return d, nil
	}
	sd, err := l.shared.PausedFor(ctx, l.prefix+pauseKey)
	if err != nil {
		return d, fmt.Errorf("shared pause: %w", err)
	}
	return max(d, sd), nil
}

// acquire waits until a call of mode m to chatID may go out, or returns a
// *chat.RateLimitError where m must not wait. A paced call takes a
// token of its chat, then one of the bot.
func (l *limiter) acquire(ctx context.Context, chatID int64, m mode) error {
	if err := l.waitPause(ctx, m, true); err != nil {
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
	// A 429 may have paused the bot while this call waited for tokens
	// (one on another replica shows in the shared pause asked above).
	return l.waitPause(ctx, m, false)
}

// waitPause waits out a bot-wide pause, or returns it as a RateLimitError
// where m must not wait. shared asks the replicas' shared pause too.
func (l *limiter) waitPause(ctx context.Context, m mode, shared bool) error {
	for {
		d, err := l.pausedFor(ctx, shared)
		if err != nil {
			return err
		}
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
