package discord

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// Run connects to the gateway and receives events until ctx ends, then
// returns nil. Events go to sink in the order Discord sent them; an
// interaction is acknowledged (a deferred answer) once sink returned nil
// for it. A refused token (401, 4004) or intent (4014) ends Run with an
// error after one log line: the adapter stops, pibot keeps running.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	if err := a.calls.refusedErr(); err != nil {
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
			a.feeder.handle(ctx, ev, sink)
			a.gw.state.handled(ev)
		}
	}()
	err := a.gw.loop(ctx, events)
	close(events)
	wg.Wait()
	a.gw.state.persist(true) // after the last event was handled: a restart resumes from there
	if errors.Is(err, ErrTokenRefused) || errors.Is(err, errIntent) || a.calls.refusedErr() != nil {
		return a.calls.refuse(err)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// feeder hands the gateway's message and interaction dispatches to the
// sink, once each (a resumed session may deliver one again).
type feeder struct {
	seen     *recent
	in       *reader
	answerer *answerer
	log      *slog.Logger
	command  string // the slash command's name (Config.Command)
}

// handle delivers one dispatch.
func (f *feeder) handle(ctx context.Context, ev dispatch, sink chat.Sink) {
	switch ev.t {
	case "MESSAGE_CREATE":
		var m discordgo.Message
		if err := m.UnmarshalJSON(ev.d); err != nil {
			f.log.Warn("discord: unreadable MESSAGE_CREATE", "err", err)
			return
		}
		if !f.seen.add("m" + m.ID) {
			f.log.Debug("discord: message delivered before; dropped", "id", m.ID)
			return
		}
		in, ok := f.in.message(ctx, &m)
		if !ok {
			f.seen.forget("m" + m.ID) // nothing was delivered
			return
		}
		if err := sink(ctx, in); err != nil {
			f.seen.forget("m" + m.ID)
			f.log.Log(ctx, chat.RefusedLevel(err), "discord: message not taken", "id", m.ID, "err", err)
		}
	case "INTERACTION_CREATE":
		var ix discordgo.Interaction
		if err := ix.UnmarshalJSON(ev.d); err != nil {
			f.log.Warn("discord: unreadable INTERACTION_CREATE", "err", err)
			return
		}
		if !f.seen.add("i" + ix.ID) {
			return
		}
		in, ok := f.in.interaction(ctx, &ix)
		if !ok {
			if ix.Type == discordgo.InteractionApplicationCommand && ix.Token != "" {
				// An old or foreign command name: say so rather than
				// let Discord report a failure.
				f.answerer.notice(ctx, &ix, "This command is not pibot's: use /"+f.command+" <subcommand>.")
			}
			return
		}
		done := f.answerer.startAck(ix.ID)
		f.answerer.take(ctx, &ix, in, sink)
		done()
	}
}

// ackBy is how long the sink may take before an interaction is
// acknowledged anyway: Discord fails an interaction not answered within
// 3 s.
const ackBy = 2 * time.Second

// take hands an interaction to sink and acknowledges it once
// sink returned, or after ackBy if sink is slow; a sink that then fails
// is reported to the user through the interaction, only to them.
func (x *answerer) take(ctx context.Context, ix *discordgo.Interaction, in chat.Inbound, sink chat.Sink) {
	res := make(chan error, 1)
	go func() { res <- sink(ctx, in) }() // owned: both paths below wait for it
	t := time.NewTimer(ackBy)
	defer t.Stop()
	select {
	case err := <-res:
		x.acknowledge(ctx, ix, in, err)
		return
	case <-t.C:
	}
	x.log.Warn("discord: the interaction is taking long to store; acknowledging it now", "id", ix.ID)
	x.acknowledge(ctx, ix, in, nil)
	if err := <-res; err != nil {
		x.log.Warn("discord: interaction not taken", "id", ix.ID, "err", err)
		app := ix.AppID
		if app == "" {
			app, _ = x.app(ctx)
		}
		if _, ferr := x.followUp(ctx, in.Conv, tokenHandle{app: app, token: ix.Token},
			chat.Out{Markdown: "pibot could not take this right now; please try again."}, true); ferr != nil {
			x.log.Warn("discord: could not tell the user", "err", ferr)
		}
	}
}
