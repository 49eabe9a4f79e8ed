package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/pibot/pibot/cluster"
)

// The shared inbox is told when this process stops handling the items it
// took for a key (cluster.Leaver: rediscluster.Inbox, cluster.LocalInbox):
// the lease of their session was lost (cut: their runs were stopped
// unrecorded, which counts one crash against each, so an item whose
// handling keeps stalling its replica past the lease is quarantined like
// one that keeps crashing it) or released. It forgets them, so what
// another replica acknowledges does not stay remembered here, and hands
// them over again with this process's next take of the key.

// leaveTimeout bounds the inbox's round trip of a Leave.
const leaveTimeout = 5 * time.Second

// inboxLeaver tells the shared inbox, in cluster mode, that an owner no
// longer handles the items it took for its locations.
type inboxLeaver struct {
	inbox   cluster.Leaver
	pump    *pump // its gate keeps a take of a key in flight whole (nil: none)
	located *locatedCache
	log     *slog.Logger
	outage  *outage // counts the failures of an unreachable store (cluster_outage.go)
}

// newInboxLeaver returns the leaver of g's inbox, or nil when there is
// nothing to tell (not cluster mode, or an inbox that does not forget).
func newInboxLeaver(g *Gateway) *inboxLeaver {
	l, ok := g.inbox.(cluster.Leaver)
	if !ok || !g.cfg.Cluster.Enabled {
		return nil
	}
	return &inboxLeaver{inbox: l, pump: g.pump, located: &g.sessions.located, log: g.log}
}

// leave tells the inbox that o no longer handles the items it took for
// its locations: its lease was lost (cut) or it released it. The owner
// calls it once its runs are stopped (watchLease) or it is closed; a
// second call finds nothing left to leave. Each key is left under its
// gate, so a take of the key in flight (the pump's, or an admission's) is
// not half forgotten. A nil leaver does nothing.
func (il *inboxLeaver) leave(o *owner, cut bool) {
	if il == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	for _, key := range il.keys(o) {
		unlock := func() {}
		if il.pump != nil {
			unlock = il.pump.gate.lock(key)
		}
		err := il.inbox.Leave(ctx, key, cut)
		if err == nil && il.pump != nil {
			// What was handed before is handed over again (cluster_given.go).
			// A failed Leave may not have given them up: they stay
			// valid, a duplicate being better than a loss.
			il.pump.given.add(key)
		}
		unlock()
		if err != nil {
			// Only the count of a cut is lost (Redis down, which is
			// likely why the lease was lost): the items are forgotten.
			il.outage.report(il.log, "inbox: leave the items of a session given up", err)
		}
	}
}

// keys lists the locations of o and those the registry found bound to it
// (an item taken for a location its owner has not placed yet).
func (il *inboxLeaver) keys(o *owner) []string {
	seen := map[string]bool{}
	var keys []string
	for _, k := range o.locationKeys() {
		seen[k] = true
		keys = append(keys, k)
	}
	return append(keys, il.located.keysOf(o, seen)...)
}
