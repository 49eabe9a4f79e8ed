package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/access"
)

// Kinds of inbox item: what the owner's mailbox does with it.
const (
	itemMessage = ""        // a chat message: starts or feeds a run (Mode, Resume)
	itemCommand = "command" // a command that acts on a session: its handler runs
	itemPress   = "press"   // a button press: decided (approvals, tree jumps)
)

// inboxItem is what the inbox stores for one accepted event.
type inboxItem struct {
	// Kind is one of the item kinds; "" is a message (items written
	// before kinds existed are all messages).
	Kind string       `json:"kind,omitempty"`
	In   chat.Inbound `json:"in"`
	// Mode forces a queue mode (from /steer and /followup).
	Mode string `json:"mode,omitempty"`
	// Resume marks a run to finish after a restart (a tool approved after
	// the run that asked was gone): no new message, only In.Conv is set.
	Resume bool `json:"resume,omitempty"`
}

// sink is the chat.Sink of every adapter.
func (g *Gateway) sink(ctx context.Context, in chat.Inbound) error {
	g.metrics.inbound(in.Conv.Platform)
	if in.Kind == chat.KindMoved {
		// A platform event, judged by the group it moves, not by a sender.
		g.moved(ctx, in)
		return nil
	}
	d := g.access.Check(ctx, in)
	if d.Err != nil {
		// Not let in on a store that cannot say; the next message asks again.
		g.log.Error("access check failed; event ignored", "conv", in.Conv.Key(), "user", in.User.ID, "err", d.Err)
	}
	switch d.Verdict {
	case access.Ignore:
		return nil
	case access.Pair, access.Deny:
		g.reply(ctx, in, d.Reply)
		return nil
	}
	if in.DedupKey != "" {
		dup, err := g.dedupe.Seen(ctx, in.DedupKey)
		if err != nil {
			return fmt.Errorf("gateway: dedupe: %w", err)
		}
		if dup {
			g.log.Debug("duplicate event dropped", "key", in.DedupKey)
			return nil
		}
	}
	if !g.withinBudget(ctx, in) { // messages and commands, not presses
		return nil
	}
	item := inboxItem{In: in}
	switch {
	case in.Kind == chat.KindAction && in.Action != nil:
		item.Kind = itemPress
	case in.Command != nil:
		if !g.commands.needsSession(in.Command.Name) {
			// /help, /whoami, an unknown command, and the usage and
			// rights answers of /steer and /followup: no session needed.
			mode, handled := g.commands.dispatch(ctx, in, false)
			if handled {
				return nil
			}
			item.Mode = mode
			item.In.Text = in.Command.Args
			item.In.Command = nil
		} else {
			item.Kind = itemCommand
		}
	}
	if item.Kind == itemMessage && item.In.Text == "" && len(item.In.Files) == 0 {
		return nil
	}
	data, err := json.Marshal(item)
	if err != nil {
		return fmt.Errorf("gateway: encode inbound: %w", err)
	}
	id, durable, err := g.inbox.Begin(ctx, data)
	if err == nil {
		// The run may start while the inbox fsync is in flight; the
		// platform hears "received" only once the message is durable.
		g.post(id, item, false)
		err = durable()
	}
	if err != nil && item.Kind != itemMessage {
		// A command or press works without the inbox, as it always did
		// (/stop on a full disk): it is only not replayed after a crash.
		g.log.Warn("inbox: a command or button press is not durable; executed anyway", "conv", in.Conv.Key(), "err", err)
		if id == "" {
			g.post("", item, false)
		}
		return nil
	}
	if err != nil {
		// Not acknowledged: the platform delivers it again, and a copy
		// that already reached its session is recognised there.
		if in.DedupKey != "" {
			if ferr := g.dedupe.Forget(ctx, in.DedupKey); ferr != nil {
				// The redelivery will be dropped as a duplicate.
				g.log.Error("dedupe: forget a refused event", "key", in.DedupKey, "err", ferr)
			}
		}
		g.storageFailed(nil, err) // health.go: degraded until a probe succeeds
		g.storageDown(ctx, in)
		if id != "" {
			// Not taken: the redelivery is. (On a failing disk this ack
			// may fail too; the copy then replays at the next start and
			// its session recognises it.)
			if aerr := g.inbox.Ack(ctx, id); aerr != nil {
				g.log.Warn("inbox: ack a refused message", "id", id, "err", aerr)
			}
		}
		return fmt.Errorf("gateway: inbox: %w", err)
	}
	return nil
}

// withinBudget applies the per-sender message budget. A sender over it is
// told once per cool-down that the message was not processed.
func (g *Gateway) withinBudget(ctx context.Context, in chat.Inbound) bool {
	if g.budget == nil || in.Kind != chat.KindMessage || g.access.IsOwner(in.Conv.Platform, in.User.ID) {
		return true
	}
	key := string(in.Conv.Platform) + ":" + in.User.ID
	wait, err := g.budget.Reserve(ctx, key)
	if err != nil {
		// A budget that cannot be asked does not stop messages.
		g.log.Warn("sender budget unavailable; message let through", "err", err)
		return true
	}
	if wait <= 0 {
		return true
	}
	g.metrics.dropped()
	notice, err := g.budget.Reserve(ctx, key+":notice")
	switch {
	case err != nil:
		g.log.Warn("sender budget unavailable; over-budget notice not sent", "err", err)
	case notice <= 0:
		g.reply(ctx, in, fmt.Sprintf("⏳ You are sending messages faster than I can take them; this one was not processed. Try again in %s.", wait.Round(time.Second)))
	}
	return false
}

// post hands an inbox item to the mailbox of its location, where it is
// executed after everything that came before it there. replay marks an
// item taken from the inbox at start.
func (g *Gateway) post(inboxID string, item inboxItem, replay bool) {
	g.mail.post(item.In.Conv.Key(), func() { g.execute(g.runContext(), inboxID, item, replay) })
}

// execute does the work of one inbox item; it runs in the mailbox of the
// item's location.
func (g *Gateway) execute(ctx context.Context, inboxID string, item inboxItem, replay bool) {
	switch item.Kind {
	case itemMessage:
		g.route(ctx, &pending{item: item, inboxID: inboxID})
		return
	case itemCommand:
		g.commands.dispatch(ctx, item.In, replay)
	case itemPress:
		g.commands.press(ctx, item.In)
	default:
		g.log.Error("inbox item of an unknown kind dropped", "kind", item.Kind, "conv", item.In.Conv.Key())
	}
	// A command's or press's changes to the session are flushed by the
	// time it returns (they are appended with SyncAlways).
	if inboxID != "" {
		if err := g.inbox.Ack(ctx, inboxID); err != nil {
			g.log.Warn("inbox ack", "err", err)
		}
	}
}

// route finds p's owner and location and hands p over.
func (g *Gateway) route(ctx context.Context, p *pending) {
	o, loc, err := g.locate(ctx, p.item.In)
	if err != nil {
		g.log.Error("route message", "conv", p.item.In.Conv.Key(), "err", err)
		g.reply(ctx, p.item.In, "⚠️ I could not open this conversation's session; the details are in pibot's log.")
		return
	}
	o.accept(ctx, loc, p)
}

// ackAll tells the inbox the messages are done with: their run finished,
// or they were dropped on purpose.
func (g *Gateway) ackAll(ctx context.Context, ps []*pending) {
	for _, p := range ps {
		for _, id := range p.inboxIDs() {
			if err := g.inbox.Ack(ctx, id); err != nil {
				g.log.Warn("inbox ack", "err", err)
			}
		}
	}
}

// reply sends a short answer to the conversation of in.
func (g *Gateway) reply(ctx context.Context, in chat.Inbound, md string) {
	a := g.adapters[in.Conv.Platform]
	if a == nil || md == "" {
		return
	}
	out := chat.Out{Markdown: md}
	if in.Msg.ID != "" {
		ref := in.Msg
		out.ReplyTo = &ref
	}
	if _, err := a.Send(ctx, in.Conv, out); err != nil {
		g.log.Warn("send reply", "conv", in.Conv.Key(), "err", err)
	}
}

// react marks a message with an emoji where the platform can.
func (g *Gateway) react(ctx context.Context, ref chat.MsgRef, emoji string) bool {
	a, ok := g.adapters[ref.Conv.Platform].(chat.Reactor)
	if !ok || ref.ID == "" {
		return false
	}
	if err := a.React(ctx, ref, emoji); err != nil {
		g.log.Debug("react", "err", err)
		return false
	}
	return true
}
