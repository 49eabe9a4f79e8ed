package telegram

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// liveMaxWait is the longest a live call (edit, draft) waits for its chat's
// budget; a longer wait is returned as a RateLimitError instead.
const liveMaxWait = 1500 * time.Millisecond

// tokenBucket refills rate tokens per second up to burst.
type tokenBucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func newBucket(rate float64, burst int, now time.Time) *tokenBucket {
	return &tokenBucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

func (b *tokenBucket) refill(now time.Time) {
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
}

// delay is how long until a token is available. A wait is lengthened by a
// tenth of the refill interval so that network jitter between two calls
// cannot make them reach Telegram closer together than the budget allows.
func (b *tokenBucket) delay(now time.Time) time.Duration {
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1.1 - b.tokens) / b.rate * float64(time.Second))
}

// limiter paces outbound calls: a token bucket per chat and one for the
// bot, and a bot-wide pause after a 429.
type limiter struct {
	budget Budget

	mu          sync.Mutex
	pausedUntil time.Time
	global      *tokenBucket
	chats       map[int64]*tokenBucket
}

func newLimiter(b Budget) *limiter {
	return &limiter{budget: b, global: newBucket(b.GlobalPerSec, int(math.Max(1, b.GlobalPerSec)), time.Now()), chats: map[int64]*tokenBucket{}}
}

// pause stops every call of the bot for d.
func (l *limiter) pause(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := time.Now().Add(d); until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
}

func (l *limiter) bucket(chatID int64, now time.Time) *tokenBucket {
	b := l.chats[chatID]
	if b != nil {
		return b
	}
	if len(l.chats) >= 4096 {
		for id, old := range l.chats {
			if old.refill(now); old.tokens >= old.burst {
				delete(l.chats, id)
			}
		}
	}
	if chatID > 0 {
		b = newBucket(l.budget.PrivatePerSec, l.budget.PrivateBurst, now)
	} else {
		b = newBucket(l.budget.GroupPerMin/60, l.budget.GroupBurst, now)
	}
	l.chats[chatID] = b
	return b
}

// acquire waits until a call of mode m to chatID may go out, or returns a
// *chat.RateLimitError where m must not wait.
func (l *limiter) acquire(ctx context.Context, chatID int64, m mode) error {
	for {
		l.mu.Lock()
		now := time.Now()
		if d := l.pausedUntil.Sub(now); d > 0 {
			l.mu.Unlock()
			if m.live() {
				return &chat.RateLimitError{RetryAfter: d, Scope: "bot"}
			}
			if err := sleep(ctx, d); err != nil {
				return err
			}
			continue
		}
		if !m.budgeted() {
			l.mu.Unlock()
			return nil
		}
		b := l.bucket(chatID, now)
		wc, wg := b.delay(now), l.global.delay(now)
		if wc == 0 && wg == 0 {
			b.tokens--
			l.global.tokens--
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		d := max(wc, wg)
		if m.live() && d > liveMaxWait {
			scope := "chat"
			if wg > wc {
				scope = "global"
			}
			return &chat.RateLimitError{RetryAfter: d, Scope: scope}
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
	}
}
