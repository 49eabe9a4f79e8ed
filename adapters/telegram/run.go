package telegram

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/tokenbucket"
)

const maxBackoff = 60 * time.Second

// Run learns the bot's identity (getMe), then receives updates until ctx
// ends and returns nil then. In polling mode it runs its own getUpdates
// loop and confirms an update (the next offset) only after sink returned
// nil for it; in webhook mode it registers the webhook and serves
// deliveries through WebhookHandler. A wrong token ends Run with an error.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	if err := a.learnIdentity(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return a.refuse(err)
	}
	if a.cfg.Mode == ModeWebhook {
		return a.runWebhook(ctx, sink)
	}
	return a.poll(ctx, sink)
}

// learnIdentity calls getMe until it succeeds, backing off on temporary
// failures.
func (a *Adapter) learnIdentity(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		var me *models.User
		err := a.do(ctx, modeAdmin, 0, "getMe", func(ctx context.Context) (err error) {
			me, err = a.bot.GetMe(ctx)
			return err
		})
		if err == nil {
			a.mu.Lock()
			a.me = identity{id: me.ID, username: me.Username}
			a.mu.Unlock()
			a.log.Info("telegram: connected", "bot", "@"+me.Username, "mode", a.cfg.Mode)
			return nil
		}
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			return fmt.Errorf("telegram: the bot token (adapters.telegram.token) was rejected: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d := min(a.retryBase<<min(attempt, 7), maxBackoff)
		a.log.Warn("telegram: getMe failed; retrying", "in", d, "err", err)
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}

type getUpdatesParams struct {
	Offset         int64    `json:"offset,omitempty"`
	Timeout        int      `json:"timeout"`
	AllowedUpdates []string `json:"allowed_updates"`
}

// poll is the long-polling loop. The offset moves past an update only once
// sink has returned nil for it, so an update whose sink call failed is
// fetched and fed again.
func (a *Adapter) poll(ctx context.Context, sink chat.Sink) error {
	if err := a.do(ctx, modeAdmin, 0, "deleteWebhook", func(ctx context.Context) error {
		_, err := a.bot.DeleteWebhook(ctx, &bot.DeleteWebhookParams{})
		return err
	}); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		a.log.Warn("telegram: deleteWebhook failed; polling anyway", "err", err)
	}
	var offset int64
	var failures, conflicts int
	timeout := int(a.cfg.PollTimeout / time.Second)
	for ctx.Err() == nil {
		var updates []models.Update
		pctx, cancel := context.WithTimeout(ctx, a.cfg.PollTimeout+15*time.Second)
		err := a.raw(pctx, "getUpdates", getUpdatesParams{Offset: offset, Timeout: timeout, AllowedUpdates: a.cfg.AllowedUpdates}, &updates)
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
				d = min(a.conflictBase<<min(conflicts-1, 6), 5*maxBackoff)
				a.log.Error("telegram: 409 Conflict from getUpdates: another process polls this bot token, or a webhook is set; run one pibot per token (misconfiguration)",
					"retry_in", d, "err", a.redact(err))
			case errors.As(err, &tooMany):
				d = time.Duration(max(tooMany.RetryAfter, 1)) * time.Second
				if perr := a.limiter.pause(ctx, d); perr != nil {
					a.log.Warn("telegram: the other replicas were not told to wait", "err", perr)
				}
				a.log.Warn("telegram: getUpdates rate limited", "retry_in", d)
			case errors.Is(err, bot.ErrorUnauthorized):
				return a.refuse(fmt.Errorf("telegram: getUpdates: the bot token (adapters.telegram.token) was revoked: %s", a.redact(err)))
			default:
				failures++
				d = min(a.retryBase<<min(failures, 7), maxBackoff)
				a.log.Warn("telegram: getUpdates failed", "retry_in", d, "err", a.redact(err))
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
			if err := a.feed(ctx, sink, u); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				failures++
				d := min(a.retryBase<<min(failures, 7), maxBackoff)
				a.log.Warn("telegram: update not taken; it will be fetched again", "update_id", u.ID, "retry_in", d, "err", err)
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

// feed hands one update to sink; nil means it may be confirmed.
func (a *Adapter) feed(ctx context.Context, sink chat.Sink, u *models.Update) error {
	in, ok := a.inbound(u)
	if !ok {
		return nil
	}
	return sink(ctx, in)
}

// runWebhook registers the webhook and serves until ctx ends.
func (a *Adapter) runWebhook(ctx context.Context, sink chat.Sink) error {
	url := a.webhookURL()
	err := a.do(ctx, modeAdmin, 0, "setWebhook", func(ctx context.Context) error {
		_, err := a.bot.SetWebhook(ctx, &bot.SetWebhookParams{URL: url, SecretToken: a.whSecret.Reveal(), AllowedUpdates: a.cfg.AllowedUpdates})
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.mu.Lock()
	a.sink = sink
	a.mu.Unlock()
	a.log.Info("telegram: webhook set", "path", a.whPath)
	<-ctx.Done()
	a.mu.Lock()
	a.sink = nil
	a.mu.Unlock()
	return nil
}
