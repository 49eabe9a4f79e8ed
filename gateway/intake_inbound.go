package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/crashpoint"
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
	// Trace is the W3C traceparent of the intake span (otel.endpoint),
	// so the run's span continues the message's trace.
	Trace string `json:"trace,omitempty"`
}

// route finds p's owner and location and hands p over. take, if not nil,
// is the offer of the mailbox goroutine p's item is executed on: a run p
// starts at once runs there (queue.accept).
func (g *Gateway) route(ctx context.Context, p *pending, take takeOver) {
	if g.pump.dropStale(ctx, p.inboxRefs()...) {
		return
	}
	o, loc, err := g.sessions.locate(ctx, p.item.In)
	if err != nil && g.cfg.Cluster.Enabled && errors.Is(err, cluster.ErrLeaseHeld) {
		// Another replica took the session meanwhile: the item stays in
		// the inbox, and that replica claims it (cluster_shared.go).
		g.log.Info("route message: session held by another replica", "conv", p.item.In.Conv.Key())
		return
	}
	if err != nil {
		g.log.Error("route message", "conv", p.item.In.Conv.Key(), "err", err)
		g.replier.reply(ctx, p.item.In, "⚠️ I could not open this conversation's session; the details are in pibot's log.")
		return
	}
	// Asked again: a Leave of the closing owner that routed p again may
	// have come since, the lease it released then taken here by locate.
	if g.pump.dropStale(ctx, p.inboxRefs()...) {
		return
	}
	g.threads.touch(p.item.In.Conv)
	o.queue.accept(ctx, loc, p, take)
}

// ackAll tells the inbox the messages are done with: their run finished,
// or they were dropped on purpose. In cluster mode a failed Ack is tried
// again while lease, their session's, lives (cluster_ackretry.go).
func (g *Gateway) ackAll(ctx context.Context, lease cluster.Lease, ps []*pending) {
	for _, p := range ps {
		for _, ref := range p.inboxRefs() {
			err := g.inbox.Ack(ctx, ref.key, ref.id)
			if err == nil {
				crashpoint.Hit(crashpoint.InboxAck)
				continue
			}
			if g.pump != nil && g.pump.acks.add(ref, lease) {
				g.log.Warn("inbox ack; trying again", "key", ref.key, "id", ref.id, "err", err)
				continue
			}
			g.log.Warn("inbox ack", "key", ref.key, "id", ref.id, "err", err)
		}
	}
}

// beginAll tells the inbox that the work of ps now executes: a run took
// them (runStarter, run.record) or joined them (queue.joinRun). Each is
// told once.
func (g *Gateway) beginAll(ctx context.Context, ps []*pending) {
	var refs []inboxRef
	for _, p := range ps {
		if p.inbox.begun {
			continue
		}
		p.inbox.begun = true
		refs = append(refs, p.inboxRefs()...)
	}
	beginRefs(ctx, g.inbox, g.log, refs)
}

// beginRefs tells inbox, if it counts crashes per item (cluster.Beginner), that
// the work of refs now executes. A failure only loses a crash count.
func beginRefs(ctx context.Context, inbox Inbox, log *slog.Logger, refs []inboxRef) {
	b, ok := inbox.(cluster.Beginner)
	if !ok {
		return
	}
	byKey := map[string][]string{}
	var keys []string
	for _, ref := range refs {
		if ref.id == "" {
			continue
		}
		if _, ok := byKey[ref.key]; !ok {
			keys = append(keys, ref.key)
		}
		byKey[ref.key] = append(byKey[ref.key], ref.id)
	}
	for _, key := range keys {
		if err := b.Begin(ctx, key, byKey[key]...); err != nil {
			log.Warn("inbox: record the items whose work began", "key", key, "err", err)
		}
	}
}
