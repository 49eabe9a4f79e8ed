package gateway

import (
	"context"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/session"
)

// moved applies a chat.KindMoved event: the adapter saw the platform move
// a group to a new id (a Telegram group that became a supergroup). Every
// location of the old group gets a binding at the new id, on the same
// session and head; a listed group keeps its access at the new id until
// the config names it.
//
// Only adapters produce the event, from the platform's own service data;
// no text a user types reaches this code. A location already bound at the
// new id is left alone, so a repeated event (Telegram reports the move in
// both chats) cannot rewind the new conversation.
func (g *Gateway) moved(ctx context.Context, in chat.Inbound) {
	mv := in.Moved
	if mv == nil {
		return
	}
	from, to := mv.From, mv.To
	if from.Platform != in.Conv.Platform || to.Platform != from.Platform || from.DM || to.DM ||
		from.Thread != "" || to.Thread != "" || from.Channel == "" || to.Channel == "" || from.Key() == to.Key() {
		g.log.Warn("ignored a malformed move event", "from", from.Key(), "to", to.Key())
		return
	}
	if g.access.GroupAllowed(from.Platform, from.Channel) {
		g.access.Alias(from.Platform, from.Channel, to.Channel)
		g.log.Warn("a group moved to a new id; update access.groups in the config", "from", from.Channel, "to", to.Channel)
	}
	keys, err := g.index.KeysWithPrefix(ctx, from.Key())
	if err != nil {
		g.log.Warn("move conversation: list its locations", "conv", from.Key(), "err", err)
		return
	}
	for _, key := range keys {
		path, ok, err := g.index.Get(ctx, key)
		if err != nil {
			g.log.Warn("move conversation", "loc", key, "err", err)
			continue
		}
		if !ok || path == "" {
			continue
		}
		dest := to
		dest.Thread = strings.TrimPrefix(strings.TrimPrefix(key, from.Key()), ":")
		if _, bound, err := g.index.Get(ctx, dest.Key()); bound || err != nil {
			continue
		}
		src := from
		src.Thread = dest.Thread
		o, err := g.sessions.owner(ctx, path, nil)
		if err != nil {
			g.log.Warn("move conversation", "loc", key, "err", err)
			continue
		}
		head := o.head(o.location(key, src))
		if err := o.moveHead(o.location(dest.Key(), dest), head, session.SyncAlways); err != nil {
			g.log.Warn("move conversation", "loc", key, "err", err)
			continue
		}
		if err := g.index.Set(ctx, dest.Key(), path); err != nil {
			g.log.Warn("move conversation", "loc", key, "err", err)
			continue
		}
		g.log.Info("conversation moved", "from", key, "to", dest.Key())
	}
}
