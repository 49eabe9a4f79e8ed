package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// owner is the one writer of a session file. Its sessionFile (embedded:
// the file's lock is the owner's) holds the lease, the head of every
// location and the appends; the owner keeps the locations, its queue
// (owner_queue.go) decides what happens to a message that arrives while a run
// works, and its runs (owner_start.go) start and hand over the agent runs of
// its locations. Runs in different locations proceed concurrently;
// appends are serialised by mu.
type owner struct {
	ownerDeps
	*sessionFile
	// queue applies the queue modes to arriving messages.
	queue queue
	// runs starts the runs of the owner's locations.
	runs runStarter
	// durable acknowledges its runs' messages once the file is durable.
	durable durableAcks

	locs map[string]*location // guarded by mu
	// left: watchLease gave the owner's items up (a cut Leave) before
	// the registry forgot the owner; close does not leave them again
	// (guarded by mu).
	left bool
	// stopWatch ends watchLease when the owner closes.
	stopWatch chan struct{}
	// done is closed when close has ended: the session is closed and the
	// lease released.
	done chan struct{}
}

// ownerDeps are the collaborators of every owner; the gateway wires them
// (Gateway.newOwner).
type ownerDeps struct {
	log *slog.Logger
	cfg *Config // the gateway's, read-only
	// adapters send the replies; splitters are shared by every reply's
	// stream controller.
	adapters  map[chat.Platform]chat.Adapter
	splitters *chat.Splitters
	models    Models
	metrics   *Metrics
	index     Index
	approval  *approvals
	spend     spendCaps
	// replier sends the owner's notices (queued, dropped, done).
	replier *replier
	// health is told of failed writes and keeps what they stranded.
	health *health
	// post queues work on the mailbox of a location (mailboxes.post).
	post func(loc string, f func()) bool
	// route hands a message to its owner and location again (Gateway.route).
	route func(ctx context.Context, p *pending, take takeOver)
	// ack tells the inbox messages are done with (Gateway.ackAll).
	ack func(ctx context.Context, ps []*pending)
	// begin tells the inbox a run took messages (Gateway.beginAll).
	begin func(ctx context.Context, ps []*pending)
	// leave tells the inbox the owner no longer handles the items it
	// took, its lease lost (cut) or released (inboxLeaver.leave).
	leave func(o *owner, cut bool)
	// receiveFile saves a file of a message into the workspace.
	receiveFile receiver
	// forget removes o from the loaded owners if it is still there
	// (registry.forget).
	forget func(o *owner) bool
	// unloaded tells the registry o's close has ended
	// (registry.unloaded).
	unloaded func(o *owner)
}

// newOwner builds the owner of a session the registry loaded.
func (g *Gateway) newOwner(path string, s *session.Session, lease cluster.Lease) *owner {
	deps := ownerDeps{log: g.log, cfg: &g.cfg, adapters: g.adapters, splitters: &g.splitters, models: g.models, metrics: g.metrics,
		index: g.index, approval: g.approval, spend: g.spend, replier: g.replier, health: g.health, post: g.mail.post, route: g.route, leave: g.leaver.leave,
		begin: g.beginAll, receiveFile: fileReceiver{adapters: g.adapters}.receive, forget: g.sessions.forget, unloaded: g.sessions.unloaded}
	deps.ack = func(ctx context.Context, ps []*pending) { g.ackAll(ctx, lease, ps) }
	o := &owner{ownerDeps: deps, locs: map[string]*location{}, done: make(chan struct{})}
	o.sessionFile = &sessionFile{path: path, sess: s, lease: lease, heads: s.Tree().Heads(), lastUsed: time.Now(), fileAgent: fileAgent{cfg: &g.cfg},
		env: fileEnv{log: g.log, index: g.index, failed: func(err error) { g.health.storageFailed(o, err) },
			changed: func() { g.health.unload(o) }}}
	rec := recordedAgent(s.Tree())
	name, a := g.agents.get(rec.Name)
	rec.Name = name
	o.setAgent(rec, a)
	o.queue = queue{o}
	o.runs = runStarter{o: o, track: g.work.track, trackHere: g.work.trackHere, runContext: g.work.context}
	o.durable = durableAcks{sess: s, index: g.index, log: g.log, path: path, done: deps.ack, failed: o.env.failed, strand: g.health.strand}
	return o
}

// sessionGroupWindow is the default of Config.SessionGroupWindow: how
// long a grouped session append may wait for its fsync. It can be long:
// what must be durable at once is appended with SyncAlways (tool calls and
// results, approvals, commands), a run's lines are written to the file at
// its end (a crash of pibot keeps them), and its messages stay in the
// inbox until the group commit has fsynced them. A session is then
// fsynced about once per window however many runs it has.
const sessionGroupWindow = time.Second

// location is the state of one chat location inside a session.
type location struct {
	key  string
	conv chat.ConvRef
	mode string
	run  *run
	// waits holds what waits for a run (mailbox.go).
	waits waitList
	// allowed tools for the rest of the session ("Allow for this session").
	allowed map[string]bool
	model   string
	// branch keeps the head's context between runs; only the location's
	// run (one at a time) uses it.
	branch session.BranchCache
}

// pending is an accepted message on its way into the session.
type pending struct {
	item inboxItem
	// inbox is the item's place in the inbox ("" id: not in it).
	inbox inboxRef
	// extra lists further inbox items merged into this message (collect).
	extra []inboxRef
	// queued is set when the message waited for a run; the user is told
	// when it is applied.
	queued bool
	// applied: the message is already in the session (a replay after a
	// crash); its run is resumed without adding it again.
	applied bool
	// note is the notice that the message waits (steer, follow-up,
	// interrupt), set before the message is handed on; nil otherwise.
	note *queueNote
}

// inboxRef names an inbox item: its key (the location it was enqueued
// for) and id. begun: the inbox knows the item's work executes
// (Gateway.beginAll; or its admission said so, cluster_admit.go).
type inboxRef struct {
	key, id string
	begun   bool
	// left is how often this replica had given key's items up when the
	// item was handed (givenUp): a Leave since makes it stale.
	left uint64
}

// inboxRefs lists the inbox items p stands for.
func (p *pending) inboxRefs() []inboxRef { return append([]inboxRef{p.inbox}, p.extra...) }

func (p *pending) msgKey() string {
	if p.item.In.Msg.ID == "" {
		return ""
	}
	return p.item.In.Msg.Key()
}

// permanent reports whether lease is never lost, only released: nothing
// to watch, and no other replica can take its session over.
func permanent(lease cluster.Lease) bool {
	p, ok := lease.(cluster.PermanentLease)
	return ok && p.Permanent()
}

// watchLease fences the session the moment its lease is lost (cluster
// mode: another replica may own it now): runs stop without recording
// anything more and the owner is unloaded. It ends when the owner closes.
func (o *owner) watchLease() {
	select {
	case <-o.stopWatch:
		return
	case <-o.lease.Done():
	}
	o.mu.Lock()
	closed := o.closed
	o.mu.Unlock()
	if closed {
		return
	}
	o.log.Warn("session lease lost; stopping its runs", "path", o.path)
	o.sess.SetFenced(errLeaseLost)
	o.metrics.fenceRejected()
	// Not a word more to the chat: the replica that takes the session
	// over tells the user (cluster_shared.go).
	o.silenceAll()
	if o.leave != nil {
		// Cut, while the registry still has o: until it forgets o, no
		// take of this replica claims the items (pump.take), so none
		// it takes after is given up with them.
		o.leave(o, true)
		o.mu.Lock()
		o.left = true
		o.mu.Unlock()
	}
	o.forget(o)
	o.close()
}

var errLeaseLost = errors.New("gateway: session lease lost")

// idleSince reports whether nothing ran or arrived since before.
func (o *owner) idleSince(before time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lastUsed.After(before) {
		return false
	}
	for _, l := range o.locs {
		if l.run != nil || !l.waits.empty() {
			return false
		}
	}
	return !o.approval.pendingFor(o.path)
}

// location returns the state of loc, creating it.
func (o *owner) location(key string, conv chat.ConvRef) *location {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastUsed = time.Now()
	if l, ok := o.locs[key]; ok {
		return l
	}
	l := &location{key: key, conv: conv, mode: o.savedModeLocked(key), allowed: map[string]bool{}}
	o.locs[key] = l
	return l
}

// idleAt reports whether location key has nothing to do: no run, nothing
// waiting, and not in collect mode (where a message waits for the
// window's end). A location not placed yet is idle unless the session's
// saved or default mode collects.
func (o *owner) idleAt(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.locs[key]
	if !ok {
		return o.savedModeLocked(key) != modeCollect
	}
	return l.run == nil && l.waits.empty() && l.mode != modeCollect
}

// activeRuns counts the owner's active runs.
func (o *owner) activeRuns() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, l := range o.locs {
		if l.run != nil {
			n++
		}
	}
	return n
}

// freezeAll stops every active run without recording anything more
// (shutdown): the session stays where it was, so pending approvals and
// unanswered messages are resumed after the restart.
func (o *owner) freezeAll(note string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.locs {
		if l.run != nil {
			l.run.journal.freeze()
			l.run.interrupt(note)
		}
	}
}

// close flushes and closes the session and releases the lease. A second
// call returns at once.
func (o *owner) close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	if o.stopWatch != nil {
		close(o.stopWatch)
	}
	for _, l := range o.locs {
		l.waits.stop()
	}
	left := o.left
	o.mu.Unlock()
	if err := o.sess.Close(); err != nil {
		o.log.Warn("close session", "path", o.path, "err", err)
	}
	// The items are given up while the lease still keeps every other
	// owner out: a Leave after the release could give up what a new
	// owner of the session, in this replica, took since (its take
	// would hand them over a second time). Once watchLease gave them up,
	// the registry has forgotten o and a new owner may hold them
	// already: they are not given up again.
	if o.leave != nil && !left {
		o.leave(o, false)
	}
	if o.lease != nil {
		release(context.Background(), o.log, o.lease)
	}
	if o.unloaded != nil {
		o.unloaded(o)
	}
	close(o.done)
}
