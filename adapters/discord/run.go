package discord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/internal/backoff"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// Back-off of reconnects and identifies.
const (
	resumeBase     = time.Second
	resumeMax      = 60 * time.Second
	identifyMax    = 10 * time.Minute
	eventQueueSize = 256
)

// loop connects again and again: RESUME after a dropped connection (or a
// restart within a few minutes, with Config.StatePath), IDENTIFY when the
// session is gone, spaced by a back-off that grows with every identify of
// the last 30 minutes, restarts included.
func (g *gatewayClient) loop(ctx context.Context, events chan<- dispatch) error {
	g.state.restore()
	var url string
	var failures int
	for ctx.Err() == nil {
		if url == "" {
			u, err := g.gatewayURL(ctx)
			if err != nil {
				if errors.Is(err, ErrTokenRefused) || ctx.Err() != nil {
					return err
				}
				failures++
				d := backoff.Jitter(backoff.Exp(resumeBase, failures, resumeMax))
				g.log.Warn("discord: gateway discovery failed; retrying", "in", d, "err", g.calls.clean(err))
				if tokenbucket.Wait(ctx, d) != nil {
					return nil
				}
				continue
			}
			url = u
		}
		sess := g.state.session()
		target := url
		if sess.id != "" && sess.resumeURL != "" {
			target = sess.resumeURL
		}
		if sess.id == "" {
			if wait := g.state.identifyWait(); wait > 0 {
				g.log.Info("discord: waiting before identifying again", "in", wait.Round(time.Second))
				if tokenbucket.Wait(ctx, wait) != nil {
					return nil
				}
			}
			g.state.noteIdentify()
		}
		out := g.connect(ctx, target, events)
		if ctx.Err() != nil {
			return nil
		}
		if err := closeError(out.code); err != nil {
			return err
		}
		if out.ready {
			failures = 0
		}
		if !out.resumable || out.code == 4007 || out.code == 4009 {
			g.state.update(func(s *gwSession) { *s = gwSession{} })
		}
		g.state.persist(true)
		if !out.ready {
			url = "" // the gateway URL may be stale: ask again (the back-off spaces it)
		}
		failures++
		d := backoff.Jitter(backoff.Exp(resumeBase, failures, resumeMax))
		g.log.Warn("discord: gateway connection ended; reconnecting", "code", out.code, "in", d, "err", out.err)
		if tokenbucket.Wait(ctx, d) != nil {
			return nil
		}
	}
	return nil
}

// closeError turns the close codes that must stop the adapter into errors.
func closeError(code int) error {
	switch code {
	case 4004:
		return fmt.Errorf("gateway close code 4004 (authentication failed): %w", ErrTokenRefused)
	case 4014:
		return errIntent
	case 4010, 4011, 4012, 4013:
		return fmt.Errorf("discord: gateway close code %d: pibot cannot use this gateway (invalid shard, sharding required, API version or intents)", code)
	}
	return nil
}

// gatewayURL asks GET /gateway/bot for the websocket URL, waiting if the
// daily session-start budget is spent.
func (g *gatewayClient) gatewayURL(ctx context.Context) (string, error) {
	var gb *discordgo.GatewayBotResponse
	err := g.calls.do(ctx, modeSend, "gateway/bot", "gateway", func(opts ...discordgo.RequestOption) (err error) {
		gb, err = g.calls.s.GatewayBot(opts...)
		return err
	})
	if err != nil {
		return "", err
	}
	if gb.URL == "" {
		return "", errors.New("discord: GET /gateway/bot gave no URL")
	}
	if l := gb.SessionStartLimit; l.Total > 0 && l.Remaining == 0 && l.ResetAfter > 0 {
		d := time.Duration(l.ResetAfter) * time.Millisecond
		g.log.Error("discord: the daily identify budget is spent; waiting for Discord to reset it", "in", d)
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return "", err
		}
	}
	return gb.URL, nil
}
