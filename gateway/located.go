package gateway

import "github.com/pibot/pibot/chat"

// In cluster mode the index lives in Redis, and asking it which session
// holds a location is a round trip. The registry remembers the answers
// about the sessions this replica holds: a location bound to a loaded
// owner whose lease is alive stays bound to it, because only the holder
// of a session's lease changes its locations' bindings (a new session
// after /new, a moved conversation: both run under that lease), and the
// holder forgets what it unbinds (unbound). An answer is dropped when its
// owner is unloaded or its lease ends.

// cached returns the loaded owner that location key was last found bound
// to, if it is still loaded and its lease alive; nil otherwise. Like
// owner, it touches the owner it returns, so it is not unloaded as idle
// before the caller uses it.
func (reg *registry) cached(key string) *owner {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	o, ok := reg.bound[key]
	if !ok {
		return nil
	}
	if reg.owners[o.path] != o || leaseEnded(o) {
		delete(reg.bound, key)
		return nil
	}
	o.touch()
	return o
}

// remember records that location key is bound to the loaded owner o.
func (reg *registry) remember(key string, o *owner) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.bound == nil {
		reg.bound = map[string]*owner{}
	}
	reg.bound[key] = o
}

// unbound forgets location key (its binding is being removed).
func (reg *registry) unbound(key string) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	delete(reg.bound, key)
}

// dropUnloaded forgets the locations of owners no longer loaded; the
// caller holds reg.mu.
func (reg *registry) dropUnloaded() {
	for k, o := range reg.bound {
		if reg.owners[o.path] != o {
			delete(reg.bound, k)
		}
	}
}

// leaseEnded reports whether o's lease is lost or released.
func leaseEnded(o *owner) bool {
	if o.lease == nil {
		return false
	}
	select {
	case <-o.lease.Done():
		return true
	default:
		return false
	}
}

// place returns o's location key for in, created if needed; a reply to
// an earlier message of the location moves its head there (branchTo).
func (o *owner) place(key string, in chat.Inbound) *location {
	loc := o.location(key, in.Conv)
	if in.ReplyTo != nil && in.ReplyTo.Conv.Key() == key {
		o.mu.Lock()
		busy := loc.run != nil
		o.mu.Unlock()
		// While a run is active the message joins it, or, if the run has
		// answered already, starts the next one, which branches then
		// (replyBranch).
		if !busy {
			o.branchTo(loc, *in.ReplyTo)
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
