package discord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// Back-off of reconnects and identifies.
const (
	resumeBase     = time.Second
	resumeMax      = 60 * time.Second
	identifyMax    = 10 * time.Minute
	eventQueueSize = 256
)

// Run connects to the gateway and receives events until ctx ends, then
// returns nil. Events go to sink in the order Discord sent them; an
// interaction is acknowledged (a deferred answer) once sink returned nil
// for it. A refused token (401, 4004) or intent (4014) ends Run with an
// error after one log line: the adapter stops, pibot keeps running.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	if err := a.rest.refusedErr(); err != nil {
		return err
	}
	events := make(chan dispatch, eventQueueSize)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ev := range events {
			if ctx.Err() != nil {
				continue
			}
			a.handle(ctx, ev, sink)
			a.handled(ev)
		}
	}()
	err := a.loop(ctx, events)
	close(events)
	wg.Wait()
	a.persistNow() // after the last event was handled: a restart resumes from there
	if errors.Is(err, ErrTokenRefused) || errors.Is(err, errIntent) || a.rest.refusedErr() != nil {
		return a.rest.refuse(err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// loop connects again and again: RESUME after a dropped connection (or a
// restart within a few minutes, with Config.StatePath), IDENTIFY when the
// session is gone, spaced by a back-off that grows with every identify of
// the last 30 minutes, restarts included.
func (a *Adapter) loop(ctx context.Context, events chan<- dispatch) error {
	idents := a.restore()
	a.sessionMu.Lock()
	a.idents = idents
	a.sessionMu.Unlock()
	var url string
	var failures int
	for ctx.Err() == nil {
		if url == "" {
			u, err := a.gatewayURL(ctx)
			if err != nil {
				if errors.Is(err, ErrTokenRefused) || ctx.Err() != nil {
					return err
				}
				failures++
				d := backoff(resumeBase, failures, resumeMax)
				a.log.Warn("discord: gateway discovery failed; retrying", "in", d, "err", a.rest.clean(err))
				if sleep(ctx, d) != nil {
					return nil
				}
				continue
			}
			url = u
		}
		sess := a.session()
		target := url
		if sess.id != "" && sess.resumeURL != "" {
			target = sess.resumeURL
		}
		if sess.id == "" {
			if wait := a.identifyWait(); wait > 0 {
				a.log.Info("discord: waiting before identifying again", "in", wait.Round(time.Second))
				if sleep(ctx, wait) != nil {
					return nil
				}
			}
			a.noteIdentify()
		}
		out := a.connect(ctx, target, events)
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
			a.setSession(func(s *gwSession) { *s = gwSession{} })
		}
		a.persistNow()
		if !out.ready {
			url = "" // the gateway URL may be stale: ask again (the back-off spaces it)
		}
		failures++
		d := backoff(resumeBase, failures, resumeMax)
		a.log.Warn("discord: gateway connection ended; reconnecting", "code", out.code, "in", d, "err", out.err)
		if sleep(ctx, d) != nil {
			return nil
		}
	}
	return nil
}

// identifyWait is how long the next IDENTIFY must wait: the back-off of
// the identifies of the last 30 minutes, from the last one.
func (a *Adapter) identifyWait() time.Duration {
	a.sessionMu.Lock()
	defer a.sessionMu.Unlock()
	cut := time.Now().Add(-identifyMemory)
	n := 0
	var last time.Time
	for _, t := range a.idents {
		if t.After(cut) {
			n++
			last = t
		}
	}
	if n == 0 {
		return 0
	}
	return time.Until(last.Add(backoff(a.cfg.IdentifyBackoff, n, identifyMax)))
}

// noteIdentify records an IDENTIFY now and saves it.
func (a *Adapter) noteIdentify() {
	a.sessionMu.Lock()
	a.idents = append(a.idents, time.Now())
	if len(a.idents) > 64 {
		a.idents = a.idents[len(a.idents)-64:]
	}
	a.sessionMu.Unlock()
	a.persistNow()
}

// persistNow saves the gateway state at once; persistSoon at most every
// few seconds (after dispatches).
func (a *Adapter) persistNow() { a.persistState(true) }

func (a *Adapter) persistSoon() { a.persistState(false) }

func (a *Adapter) persistState(force bool) {
	a.sessionMu.Lock()
	idents := append([]time.Time(nil), a.idents...)
	a.sessionMu.Unlock()
	a.persist(idents, force)
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

// backoff is base·2^(n-1), capped, with up to a fifth of jitter.
func backoff(base time.Duration, n int, limit time.Duration) time.Duration {
	d := base << min(max(n-1, 0), 16)
	if d > limit || d <= 0 {
		d = limit
	}
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// gatewayURL asks GET /gateway/bot for the websocket URL, waiting if the
// daily session-start budget is spent.
func (a *Adapter) gatewayURL(ctx context.Context) (string, error) {
	var g *discordgo.GatewayBotResponse
	err := a.rest.do(ctx, modeSend, "gateway/bot", "gateway", func(opts ...discordgo.RequestOption) (err error) {
		g, err = a.rest.s.GatewayBot(opts...)
		return err
	})
	if err != nil {
		return "", err
	}
	if g.URL == "" {
		return "", errors.New("discord: GET /gateway/bot gave no URL")
	}
	if l := g.SessionStartLimit; l.Total > 0 && l.Remaining == 0 && l.ResetAfter > 0 {
		d := time.Duration(l.ResetAfter) * time.Millisecond
		a.log.Error("discord: the daily identify budget is spent; waiting for Discord to reset it", "in", d)
		if err := sleep(ctx, d); err != nil {
			return "", err
		}
	}
	return g.URL, nil
}

// handle delivers one dispatch.
func (a *Adapter) handle(ctx context.Context, ev dispatch, sink chat.Sink) {
	switch ev.t {
	case "MESSAGE_CREATE":
		var m discordgo.Message
		if err := m.UnmarshalJSON(ev.d); err != nil {
			a.log.Warn("discord: unreadable MESSAGE_CREATE", "err", err)
			return
		}
		if !a.seen.add("m" + m.ID) {
			a.log.Debug("discord: message delivered before; dropped", "id", m.ID)
			return
		}
		in, ok := a.message(ctx, &m)
		if !ok {
			a.seen.forget("m" + m.ID) // nothing was delivered
			return
		}
		if err := sink(ctx, in); err != nil {
			a.seen.forget("m" + m.ID)
			a.log.Warn("discord: message not taken", "id", m.ID, "err", err)
		}
	case "INTERACTION_CREATE":
		var ix discordgo.Interaction
		if err := ix.UnmarshalJSON(ev.d); err != nil {
			a.log.Warn("discord: unreadable INTERACTION_CREATE", "err", err)
			return
		}
		if !a.seen.add("i" + ix.ID) {
			return
		}
		in, ok := a.interaction(ctx, &ix)
		if !ok {
			return
		}
		done := a.startAck(ix.ID)
		a.takeInteraction(ctx, &ix, in, sink)
		done()
	}
}

// ackBy is how long the sink may take before an interaction is
// acknowledged anyway: Discord fails an interaction not answered within
// 3 s.
const ackBy = 2 * time.Second

// takeInteraction hands an interaction to sink and acknowledges it once
// sink returned, or after ackBy if sink is slow; a sink that then fails
// is reported to the user through the interaction, only to them.
func (a *Adapter) takeInteraction(ctx context.Context, ix *discordgo.Interaction, in chat.Inbound, sink chat.Sink) {
	res := make(chan error, 1)
	go func() { res <- sink(ctx, in) }() // owned: both paths below wait for it
	t := time.NewTimer(ackBy)
	defer t.Stop()
	select {
	case err := <-res:
		a.acknowledge(ctx, ix, in, err)
		return
	case <-t.C:
	}
	a.log.Warn("discord: the interaction is taking long to store; acknowledging it now", "id", ix.ID)
	a.acknowledge(ctx, ix, in, nil)
	if err := <-res; err != nil {
		a.log.Warn("discord: interaction not taken", "id", ix.ID, "err", err)
		app := ix.AppID
		if app == "" {
			app = a.applicationID()
		}
		if _, ferr := a.followUp(ctx, in.Conv, tokenHandle{app: app, token: ix.Token},
			chat.Out{Markdown: "pibot could not take this right now; please try again."}, true); ferr != nil {
			a.log.Warn("discord: could not tell the user", "err", ferr)
		}
	}
}
