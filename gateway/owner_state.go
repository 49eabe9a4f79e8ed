package gateway

import "github.com/pibot/pibot/session"

// The owner's state as the rest of the gateway sees it. Only the session
// engine's files (inEngine in owner_boundary_test.go) take the owner's
// lock or touch a location's run, mode, model, branch, waits and allowed
// tools, the owner's locations and heads, or the session itself; every
// other file goes through these methods, each of which takes the lock for
// itself.

// locState is a location's state at one moment.
type locState struct {
	run   *run   // the active run; nil when idle
	mode  string // queue mode
	model string // model ref chosen by /model; "" for the session's
}

// state returns loc's running state, queue mode and model.
func (o *owner) state(loc *location) locState {
	o.mu.Lock()
	defer o.mu.Unlock()
	return locState{run: loc.run, mode: loc.mode, model: loc.model}
}

// activeRun returns loc's active run, nil when none runs there.
func (o *owner) activeRun(loc *location) *run {
	o.mu.Lock()
	defer o.mu.Unlock()
	return loc.run
}

// setMode sets loc's queue mode (already saved in the session).
func (o *owner) setMode(loc *location, mode string) {
	o.mu.Lock()
	loc.mode = mode
	o.mu.Unlock()
}

// setModel sets loc's model (already saved in the session).
func (o *owner) setModel(loc *location, model string) {
	o.mu.Lock()
	loc.model = model
	o.mu.Unlock()
}

// granted reports whether key (allowKey) is allowed at loc for the rest
// of the session.
func (o *owner) granted(loc *location, key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return loc.allowed[key]
}

// grant allows key (allowKey) at loc for the rest of the session.
func (o *owner) grant(loc *location, key string) {
	o.mu.Lock()
	loc.allowed[key] = true
	o.mu.Unlock()
}

// locationKeys lists the keys of the owner's placed locations.
func (o *owner) locationKeys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := make([]string, 0, len(o.locs))
	for k := range o.locs {
		keys = append(keys, k)
	}
	return keys
}

// idleHeads snapshots the head of every location of the session file
// where no run of this process is active.
func (o *owner) idleHeads() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	heads := make(map[string]string, len(o.heads))
	for k, h := range o.heads {
		if l := o.locs[k]; l != nil && l.run != nil {
			continue
		}
		heads[k] = h
	}
	return heads
}

// headOf returns the head of location key, if the file has one.
func (f *sessionFile) headOf(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h, ok := f.heads[key]
	return h, ok
}

// tree is the session's tree, for reading (it has a lock of its own).
func (f *sessionFile) tree() *session.Tree { return f.sess.Tree() }

// view returns what the file says at loc's head now (locView).
func (f *sessionFile) view(loc *location) locView {
	return locView{tree: f.tree(), key: loc.key, head: f.head(loc)}
}

// locView reads a location's branch at its head as it was when the view
// was taken (sessionFile.view), without the file's lock: the tree has a
// lock of its own. Its readers say what a location's branch holds (its
// replayed messages, its reply, its worktree).
type locView struct {
	tree *session.Tree
	key  string // the location's
	head string
}

// branch returns the entries from the root to the head.
func (v locView) branch() ([]session.Entry, error) {
	return v.tree.Branch(v.head)
}

// silenceAll stops every run of o at once, without a word to the chat and
// without recording anything: the session's lease is lost, and the
// replica that takes it over marks the cut-off reply and answers.
func (o *owner) silenceAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.locs {
		if r := l.run; r != nil {
			r.silence()
		}
	}
}
