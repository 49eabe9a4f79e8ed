package gateway

import (
	"context"
	"time"
)

// leaver is a shared inbox told when this process stops handling the
// items it took for a key (rediscluster.Inbox, cluster.Inbox): the lease
// of their session was lost (cut: their runs were stopped unrecorded,
// which counts one crash against each, so an item whose handling keeps
// stalling its replica past the lease is quarantined like one that keeps
// crashing it) or released. It forgets them, so what another replica
// acknowledges does not stay remembered here, and hands them over again
// with this process's next take of the key.
type leaver interface {
	Leave(ctx context.Context, key string, cut bool) error
}

// leaveTimeout bounds the inbox's round trip of a Leave.
const leaveTimeout = 5 * time.Second

// leaveInbox tells the inbox, in cluster mode, that o no longer handles
// the items it took for its locations: its lease was lost (cut) or it
// released it. The owner calls it once its runs are stopped (watchLease)
// or it is closed; a second call finds nothing left to leave. Each key is
// left under its gate, so a take of the key in flight (the pump's, or an
// admission's) is not half forgotten.
func (g *Gateway) leaveInbox(o *owner, cut bool) {
	l, ok := g.inbox.(leaver)
	if !ok || !g.cfg.Cluster.Enabled {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	for _, key := range g.ownerKeys(o) {
		unlock := func() {}
		if g.pump != nil {
			unlock = g.pump.gate.lock(key)
		}
		err := l.Leave(ctx, key, cut)
		unlock()
		if err != nil {
			// Only the count of a cut is lost (Redis down, which is
			// likely why the lease was lost): the items are forgotten.
			g.log.Warn("inbox: leave the items of a session given up", "key", key, "cut", cut, "err", err)
		}
	}
}

// ownerKeys lists the locations of o and those the registry found bound
// to it (an item taken for a location its owner has not placed yet).
func (g *Gateway) ownerKeys(o *owner) []string {
	seen := map[string]bool{}
	var keys []string
	o.mu.Lock()
	for k := range o.locs {
		seen[k] = true
		keys = append(keys, k)
	}
	o.mu.Unlock()
	return append(keys, g.sessions.located.keysOf(o, seen)...)
}
