package gateway

import (
	"sync"

	"github.com/pibot/pibot/chat"
)

// locatedCache remembers, in cluster mode, which loaded owner each
// location was found bound to. There the index lives in Redis, and asking
// it which session holds a location is a round trip; the answers about
// the sessions this replica holds stay true while their owner is loaded
// and its lease alive, because only the holder of a session's lease
// changes its locations' bindings (a new session after /new, a moved
// conversation: both run under that lease), and the holder forgets what
// it unbinds (forget). An entry is dropped when its owner's lease ended
// (lookup) or the registry unloads its owner (forgetOwners); the
// registry still checks that what lookup returns is its loaded owner
// (registry.cached), as an owner may be unloaded between the two.
type locatedCache struct {
	mu    sync.Mutex
	bound map[string]*owner // by location key
}

// lookup returns the owner location key was last found bound to, if its
// lease is alive; an entry whose lease ended is dropped.
func (c *locatedCache) lookup(key string) *owner {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.bound[key]
	if !ok {
		return nil
	}
	if leaseDone(o.lease) {
		delete(c.bound, key)
		return nil
	}
	return o
}

// remember records that location key is bound to the loaded owner o.
func (c *locatedCache) remember(key string, o *owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bound == nil {
		c.bound = map[string]*owner{}
	}
	c.bound[key] = o
}

// forget drops location key (its binding is being removed).
func (c *locatedCache) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.bound, key)
}

// forgetOwners drops every location bound to one of gone (owners the
// registry unloaded).
func (c *locatedCache) forgetOwners(gone ...*owner) {
	set := make(map[*owner]bool, len(gone))
	for _, o := range gone {
		set[o] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, o := range c.bound {
		if set[o] {
			delete(c.bound, k)
		}
	}
}

// keysOf lists the locations bound to o that are not in skip.
func (c *locatedCache) keysOf(o *owner, skip map[string]bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k, b := range c.bound {
		if b == o && !skip[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// reset drops every location (the registry unloads every owner).
func (c *locatedCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bound = nil
}

// place returns o's location key for in, created if needed; a reply to
// an earlier message of the location moves its head there
// (locHead.branchTo).
func (o *owner) place(key string, in chat.Inbound) *location {
	loc := o.location(key, in.Conv)
	if in.ReplyTo != nil && in.ReplyTo.Conv.Key() == key {
		busy := o.activeRun(loc) != nil
		// While a run is active the message joins it, or, if the run has
		// answered already, starts the next one, which branches then
		// (replyBranch).
		if !busy {
			locHead{f: o.sessionFile, loc: loc}.branchTo(*in.ReplyTo)
		}
	}
	return loc
}

// replyBranch is the message a run that ps start branches from: the one
// the first of ps replies to in loc, if any. A reply that came while the
// previous run was ending (its answer shown, the run not yet cleared)
// waited for this run and was not branched when it came. A message
// already in the session (a resumed run) is not moved away from.
func replyBranch(loc *location, ps []*pending) *chat.MsgRef {
	if len(ps) == 0 || ps[0].applied || ps[0].item.Resume {
		return nil
	}
	if ref := ps[0].item.In.ReplyTo; ref != nil && ref.Conv.Key() == loc.key {
		return ref
	}
	return nil
}
