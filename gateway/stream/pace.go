package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// retryBase is the first wait after a failed call that is not a rate
// limit; it doubles with each failure.
const retryBase = 500 * time.Millisecond

// errWaitExceeded is wrapped when a retry-after reaches past FinalWait.
var errWaitExceeded = errors.New("stream: retry-after beyond the final wait")

// pacer paces the platform calls of one reply: the interval between
// edits, retry-after pauses, and the strikes after which only the final
// text is sent. It is safe for concurrent use.
type pacer struct {
	log   *slog.Logger
	now   func() time.Time
	floor time.Duration // Caps.EditInterval

	mu          sync.Mutex
	interval    time.Duration
	pausedUntil time.Time
	lastOut     time.Time // last live publish
	strikes     int       // consecutive rate limits
	finalOnly   bool
}

func newPacer(log *slog.Logger, now func() time.Time, floor time.Duration) *pacer {
	p := &pacer{log: log, now: now, floor: floor, interval: floor}
	if p.interval <= 0 {
		p.interval = defaultInterval
	}
	return p
}

// limited handles a *chat.RateLimitError: it pauses the reply, doubles the
// interval and counts a strike. It reports whether err was one.
func (p *pacer) limited(err error) bool {
	rl, ok := errors.AsType[*chat.RateLimitError](err)
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if until := p.now().Add(max(rl.RetryAfter, minPause)); until.After(p.pausedUntil) {
		p.pausedUntil = until
	}
	p.interval = min(max(2*p.interval, p.floor), maxInterval)
	p.strikes++
	if p.strikes >= maxStrikes && !p.finalOnly {
		p.finalOnly = true
		p.log.Info("stream: rate limited repeatedly, only the final text will be sent", "retry_after", rl.RetryAfter)
	}
	return true
}

// ok records a call that went through: the strikes start again.
func (p *pacer) ok() {
	p.mu.Lock()
	p.strikes = 0
	p.mu.Unlock()
}

// giveUp leaves only the final text to be sent, logging why once.
func (p *pacer) giveUp(why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.finalOnly {
		p.finalOnly = true
		p.log.Info("stream: " + why + ", only the final text will be sent")
	}
}

// onlyFinal reports whether live publishing has stopped.
func (p *pacer) onlyFinal() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finalOnly
}

// pausedFor returns how long the reply is still paused at now, 0 if not.
func (p *pacer) pausedFor(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, p.pausedUntil.Sub(now))
}

// nextOut is the earliest time the reply can be published again.
func (p *pacer) nextOut() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.lastOut.Add(p.interval)
	if p.pausedUntil.After(t) {
		t = p.pausedUntil
	}
	return t
}

// dueIn returns how long until the next live publish is due at now, 0 if
// it is due.
func (p *pacer) dueIn(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastOut.IsZero() {
		return 0
	}
	return max(0, p.lastOut.Add(p.interval).Sub(now))
}

// published records a live publish at now and returns when to look again.
func (p *pacer) published(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastOut = now
	return earliest(p.interval, p.pausedUntil.Sub(now))
}

// retry calls f until it succeeds, waiting out rate-limit pauses and
// backing off after other errors, never past deadline. It gives up after
// attempts failures that are not rate limits, or limits rate limits if
// limits > 0. chat.ErrNotFound is not retried.
func (p *pacer) retry(ctx context.Context, deadline time.Time, attempts, limits int, f func() error) error {
	for failures, limited := 0, 0; ; {
		if err := p.wait(ctx, deadline); err != nil {
			return err
		}
		err := f()
		if err == nil {
			p.ok()
			return nil
		}
		if errors.Is(err, chat.ErrNotFound) || errors.Is(err, errSilenced) || ctx.Err() != nil {
			return err
		}
		if p.limited(err) {
			if limited++; limits > 0 && limited >= limits {
				return err
			}
			continue
		}
		failures++
		wait := backoff.Exp(retryBase, failures, 0)
		if failures >= attempts || p.now().Add(wait).After(deadline) {
			return err
		}
		if err := backoff.Sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// wait sleeps until the reply's pause ends, failing if it ends after
// deadline.
func (p *pacer) wait(ctx context.Context, deadline time.Time) error {
	p.mu.Lock()
	until := p.pausedUntil
	p.mu.Unlock()
	now := p.now()
	if !now.Before(until) {
		return nil
	}
	if until.After(deadline) {
		return fmt.Errorf("%w: paused until %s", errWaitExceeded, until.Format(time.RFC3339))
	}
	return tokenbucket.Wait(ctx, until.Sub(now))
}

// earliest returns the smaller of two sleep durations, where -1 is none.
func earliest(a, b time.Duration) time.Duration {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	default:
		return min(a, b)
	}
}
