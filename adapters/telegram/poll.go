package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/tokenbucket"
)

const maxBackoff = 60 * time.Second

type getUpdatesParams struct {
	Offset         int64    `json:"offset,omitempty"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates"`
}

// poller receives updates by long polling: its own getUpdates loop, which
// confirms an update (the next offset) only after the sink made it
// durable, and backs off on failures and on 409 Conflict (another process
// polls the token). In cluster mode it runs on the replica that holds the
// lease named by Adapter.SingletonKey.
type poller struct {
	calls   *caller
	reader  *reader
	log     *slog.Logger
	timeout time.Duration // long-poll timeout (Config.PollTimeout)
	allowed []string      // Config.AllowedUpdates

	// retryBase and conflictBase are the first back-off steps after a
	// failure and after a 409 Conflict.
	retryBase    time.Duration
	conflictBase time.Duration
}

// pollTransit is what a poll's window leaves for the request to reach
// Telegram and for the clocks to drift apart: a poll bounded by a lease
// ends on Telegram's side this long before the lease may pass on.
const pollTransit = 500 * time.Millisecond

// pollShortGap spaces polls that cannot wait on Telegram's side (a lease
// too short for a long poll, in tests), so they do not run hot.
const pollShortGap = 200 * time.Millisecond

// window returns the long-poll timeout of the next getUpdates: the
// configured one, cut, when held says how long this replica's polling
// lease is sure to be held, so that the poll ends on Telegram's side
// before the lease may pass to another replica (Telegram counts whole
// seconds; 0 asks without waiting). Then the next leader never polls
// while this one's poll is open, even if this process froze or lost the
// lease store after sending it. ok is false when the lease is too close
// to its end for any poll: the caller waits for its renewal (or for the
// lease's end, which cancels the run).
func (p *poller) window(held func() time.Duration) (timeout time.Duration, ok bool) {
	if held == nil {
		return p.timeout, true
	}
	left := held() - pollTransit
	if left <= 0 {
		return 0, false
	}
	return min(p.timeout, left.Truncate(time.Second)), true
}

// run is the long-polling loop; it returns nil when ctx ends, and an
// error only when Telegram revoked the token. The offset moves past an
// update only once sink has returned nil for it, so an update whose sink
// call failed is fetched and fed again. held, if not nil, bounds each
// poll by the lease the loop runs under (window).
func (p *poller) run(ctx context.Context, sink chat.Sink, held func() time.Duration) error {
	if err := p.calls.do(ctx, modeAdmin, 0, "deleteWebhook", func(ctx context.Context) error {
		_, err := p.calls.bot.DeleteWebhook(ctx, &bot.DeleteWebhookParams{})
		return err
	}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		p.log.Warn("telegram: deleteWebhook failed; polling anyway", "err", err)
	}
	var offset int64
	var failures, conflicts int
	var lastShort time.Time
	for ctx.Err() == nil {
		timeout, ok := p.window(held)
		if !ok {
			if tokenbucket.Wait(ctx, pollShortGap) != nil {
				return nil
			}
			continue
		}
		if timeout == 0 {
			if gap := pollShortGap - time.Since(lastShort); gap > 0 {
				if tokenbucket.Wait(ctx, gap) != nil {
					return nil
				}
				continue // the lease may have moved meanwhile: ask again
			}
			lastShort = time.Now()
		}
		var updates []models.Update
		pctx, cancel := context.WithTimeout(ctx, timeout+15*time.Second)
		err := p.calls.raw(pctx, "getUpdates", getUpdatesParams{Offset: offset, Timeout: int(timeout / time.Second), AllowedUpdates: p.allowed}, &updates)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var d time.Duration
			var tooMany *bot.TooManyRequestsError
			switch {
			case errors.Is(err, bot.ErrorConflict):
				conflicts++
				d = backoff.Exp(p.conflictBase, min(conflicts, 7), 5*maxBackoff)
				p.log.Error("telegram: 409 Conflict from getUpdates: another process polls this bot token, or a webhook is set; run one pibot per token (misconfiguration)",
					"retry_in", d, "err", p.calls.redact(err))
			case errors.As(err, &tooMany):
				d = time.Duration(max(tooMany.RetryAfter, 1)) * time.Second
				if perr := p.calls.limiter.pause(ctx, d); perr != nil {
					p.log.Warn("telegram: the other replicas were not told to wait", "err", perr)
				}
				p.log.Warn("telegram: getUpdates rate limited", "retry_in", d)
			case errors.Is(err, bot.ErrorUnauthorized):
				return fmt.Errorf("telegram: getUpdates: the bot token (adapters.telegram.token) was revoked: %s", p.calls.redact(err))
			default:
				failures++
				d = backoff.Exp(p.retryBase, min(failures, 7)+1, maxBackoff)
				p.log.Warn("telegram: getUpdates failed", "retry_in", d, "err", p.calls.redact(err))
			}
			if tokenbucket.Wait(ctx, d) != nil {
				return nil
			}
			continue
		}
		failures, conflicts = 0, 0
		for i := range updates {
			u := &updates[i]
			if u.ID < offset {
				continue
			}
			if err := p.reader.feed(ctx, sink, u); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				failures++
				d := backoff.Exp(p.retryBase, min(failures, 7)+1, maxBackoff)
				p.log.Log(ctx, chat.RefusedLevel(err), "telegram: update not taken; it will be fetched again", "update_id", u.ID, "retry_in", d, "err", err)
				if tokenbucket.Wait(ctx, d) != nil {
					return nil
				}
				break
			}
			failures = 0
			offset = u.ID + 1
		}
	}
	return nil
}
