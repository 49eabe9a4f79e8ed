package gateway

import (
	"context"
	"sync"
)

// givenUp counts, per key, the times this replica gave the shared inbox's
// items of the key up (inboxLeaver.leave: the lease of their session was
// lost or released). After a Leave the inbox hands them over again with
// this replica's next take of the key (or another replica's claim): what
// it handed before is stale. An item handed before and still on its way
// (in a mailbox, or routed again from a closed owner's waiting messages)
// is dropped rather than run next to the copy the next take hands over:
// both would wait behind one run, neither recorded yet, and the message
// would be answered twice (issue 29). Counts are compared, never reset,
// so a key stays in the map once given up (a few bytes per chat location
// this replica held). A Leave and the takes of its key hold the key's
// gate, so an item is stale exactly when its take came before a Leave.
type givenUp struct {
	mu sync.Mutex
	n  map[string]uint64
}

// of returns how often key was given up so far: a take records it in the
// refs of what it hands (inboxRef.left).
func (g *givenUp) of(key string) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n[key]
}

// add records that key's items were given up.
func (g *givenUp) add(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == nil {
		g.n = map[string]uint64{}
	}
	g.n[key]++
}

// stale reports whether every inbox item of refs was handed before its
// key was last given up (refs without an item are never stale).
func (g *givenUp) stale(refs ...inboxRef) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	some := false
	for _, r := range refs {
		if r.id == "" {
			continue
		}
		if r.left == g.n[r.key] {
			return false
		}
		some = true
	}
	return some
}

// dropStale reports whether p's items were given up since they were
// handed, and then lets p go: the inbox hands them over again, and the
// pump is asked to take the key soon. A nil pump (not cluster mode)
// drops nothing.
func (p *pump) dropStale(ctx context.Context, refs ...inboxRef) bool {
	if p == nil || !p.given.stale(refs...) {
		return false
	}
	p.log.InfoContext(ctx, "inbox: an item handed before its session was given up is left to the next take", "key", refs[0].key, "id", refs[0].id)
	p.resync.request(refs[0].key)
	return true
}
