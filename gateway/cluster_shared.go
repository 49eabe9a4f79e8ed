package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/pibot/pibot/cluster"
)

// ClusterConfig turns on cluster mode: the Inbox, Index, Dedupe, Budget
// and Locker given in Deps are shared with other replicas of this
// gateway (cluster/rediscluster), and every replica serves the same data
// directory.
type ClusterConfig struct {
	// Enabled: items are not run by the replica that accepted them but by
	// the one holding their session's lease (see pump).
	Enabled bool
	// Poll is how often a replica looks for inbox items of the sessions
	// it holds or could take over (default 200ms). An item accepted by
	// the holder itself is taken at once, and so is one another replica
	// accepted when the inbox tells of it (watcher).
	Poll time.Duration
}

// claimEvery is how many polls pass between two claims of the items of
// sessions a replica holds: a replica that lost a session's lease right
// after taking an item leaves it held, and the holder takes it over.
const claimEvery = 10

// heldEvery is how many polls pass between two looks at the keys of
// sessions a replica holds when the inbox tells of new items (watcher):
// kicks and notices bring their items, so the poll only makes up for a
// lost notice. claimEvery is a multiple of it.
const heldEvery = 5

// pump is cluster mode's way from the shared inbox to the sessions. The
// replica that accepts an event only enqueues it under its location and
// kicks its own pump; the inbox tells the other replicas' pumps (watcher),
// and the one holding the session takes the item at once. Every replica's
// pump also polls the keys with pending items:
//
//   - a key whose session this replica holds (loaded, lease alive):
//     Consume the new items and post them to their mailboxes;
//   - a key whose session nobody holds: take the session's lease (loading
//     it, writing the takeover marker), Claim every item (the ones a dead
//     holder took too) and replay them as a restart would (recover.go);
//   - a key whose session another replica holds: leave it to that one.
//
// A per-key lease ("inbox:" + key) serialises the taking over, so two
// replicas never create two session files for one new conversation.
type pump struct {
	log      *slog.Logger
	metrics  *Metrics
	inbox    Inbox
	consume  cluster.Consumer
	index    Index
	locker   Locker
	sessions *registry
	rc       *recovery
	post     func(ref inboxRef, item inboxItem, replay bool)
	poll     time.Duration
	kicks    chan string
	// watch tells of items other replicas enqueue (nil: the poll finds
	// them); its notices arrive on pushes.
	watch  cluster.Watcher
	pushes chan string
	// elsewhere: keys whose session another replica held, and when to ask
	// again (only run's goroutine uses it). Asking means reading the
	// session file's highest fence; a kick asks at once.
	elsewhere map[string]time.Time
	failing   bool // the last poll could not list the keys (run's goroutine only)
	// store admits an event in one round trip (cluster_admit.go; nil: the intake
	// asks the dedupe, the budget and the inbox one by one).
	store cluster.Admitter
	// gate keeps the pump's takes of a key and the intake's (admit) in
	// the inbox's order.
	gate keyGate
	// probe tells whether a session's lease is held (nil: the pump tries
	// to take it over to find out).
	probe cluster.LeaseProber
	// peek tells which held keys a take would hand anything, in one round
	// trip (nil: the poll takes each to find out; cluster_peek.go).
	peek cluster.Peeker
	// resync takes a key again soon after a take of it failed: the take
	// may have run, its answer lost (cluster_resync.go).
	resync resyncs
	// acks retries failed acknowledgements (cluster_ackretry.go) on a goroutine
	// run owns.
	acks *ackRetries
	// forgets retries the failed Forgets of refused events' dedupe keys
	// (cluster_forgetretry.go) on a goroutine run owns.
	forgets *forgetRetries
	// busy reports whether a location's mailbox has work (mailboxes.busy).
	busy func(key string) bool
	// outage follows whether the shared store answers (cluster_outage.go): the
	// poll tells it, every poll.
	outage *outage
	// given counts the Leaves of each key, to know the items handed
	// before one (cluster_given.go).
	given givenUp
}

// elsewhereWait is how long a replica leaves a key whose session another
// replica holds before it asks again: a takeover after that one died
// takes at most the lease TTL plus this.
const elsewhereWait = time.Second

// newPump builds the pump of g, or nil when g is not in cluster mode. In
// cluster mode the inbox can Consume (New refuses one that cannot).
func newPump(g *Gateway) *pump {
	c, ok := g.inbox.(cluster.Consumer)
	if !g.cfg.Cluster.Enabled || !ok {
		return nil
	}
	poll := g.cfg.Cluster.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	w, _ := g.inbox.(cluster.Watcher)
	a, _ := g.dedupe.(cluster.Admitter)
	probe, _ := g.locker.(cluster.LeaseProber)
	peek, _ := g.inbox.(cluster.Peeker)
	return &pump{log: g.log, metrics: g.metrics, inbox: g.inbox, consume: c, peek: peek, index: g.index, locker: g.locker, sessions: g.sessions,
		rc: g.recovery, post: g.intake.post, poll: poll, kicks: make(chan string, 256), elsewhere: map[string]time.Time{},
		watch: w, pushes: make(chan string, 1024), store: a, probe: probe, resync: newResyncs(),
		acks: newAckRetries(g.inbox, g.log), forgets: newForgetRetries(g.dedupe, g.log), busy: g.mail.busy}
}

// kick asks for key to be looked at now (an item was enqueued for it).
func (p *pump) kick(key string) {
	select {
	case p.kicks <- key:
	default: // the next poll sees it
	}
}

// run pumps until ctx ends. It owns the inbox's watch and the retries of
// failed acknowledgements and Forgets, which it stops and waits for
// before it returns.
func (p *pump) run(ctx context.Context) {
	t := time.NewTicker(p.poll)
	defer t.Stop()
	defer p.resync.stop()
	if p.acks != nil {
		acked := make(chan struct{})
		go func() {
			defer close(acked)
			p.acks.run(ctx)
		}()
		defer func() { <-acked }()
	}
	if p.forgets != nil {
		forgot := make(chan struct{})
		go func() {
			defer close(forgot)
			p.forgets.run(ctx)
		}()
		defer func() { <-forgot }()
	}
	if p.watch != nil {
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := p.watch.Watch(wctx, p.push); err != nil {
				p.log.Warn("inbox: notices of other replicas' items stopped; the poll finds them", "err", err)
			}
		}()
		defer func() {
			stop()
			<-done
		}()
	}
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return
		case key := <-p.kicks:
			p.kicked(ctx, key)
		case key := <-p.pushes:
			p.pushed(ctx, key)
		case key := <-p.resync.asks:
			p.resync.schedule(key, time.Now(), false)
		case <-p.resync.fire():
			for _, r := range p.resync.fired(time.Now()) {
				p.key(ctx, r.key, r.claim)
				p.resync.settle(r.key)
			}
		case <-t.C:
			n++
			keys, err := p.inbox.Keys(ctx)
			if p.down(err) {
				continue
			}
			idle := p.idleHeld(ctx, keys, n)
			for _, key := range keys {
				if ctx.Err() != nil {
					return
				}
				if idle[key] {
					continue
				}
				// A poll may ask Redis once or twice for a key (a
				// session nobody holds, a held one with something to
				// take): the kicks that came meanwhile go first, so an
				// item accepted by its session's holder does not wait
				// for the whole poll.
				p.serveKicks(ctx)
				p.polled(ctx, key, n)
			}
		}
	}
}

// serveKicks looks at the keys kicked so far: no more than were waiting
// when it began, so a stream of kicks cannot stall a poll.
func (p *pump) serveKicks(ctx context.Context) {
	for range len(p.kicks) {
		select {
		case key := <-p.kicks:
			p.kicked(ctx, key)
		default:
			return
		}
	}
}

// kicked looks at key now, as kick asked. A key whose session another
// replica held a moment ago is left to that replica when the inbox tells
// it of the item (watcher): asking again costs this replica half a dozen
// round trips and a read of the session file, for each message.
func (p *pump) kicked(ctx context.Context, key string) {
	if until, ok := p.elsewhere[key]; ok && p.watch != nil && time.Now().Before(until) {
		return
	}
	delete(p.elsewhere, key)
	p.key(ctx, key, false)
}

// push hands over a notice of the watch: another replica enqueued an
// item for key.
func (p *pump) push(key string) {
	select {
	case p.pushes <- key:
	default: // the next poll sees it
	}
}

// pushed takes the items of key at once if this replica holds its
// session, as far as it knows without asking Redis; any other key is left
// to its holder (told by the same notice) or to the poll, so a notice
// costs the replicas that do not hold the session nothing.
func (p *pump) pushed(ctx context.Context, key string) {
	if p.sessions.cached(key) != nil {
		p.key(ctx, key, false)
	}
}

// polled looks at key for poll n. A key whose session this replica
// holds is looked at every heldEvery polls only when notices bring its
// items; every other key at every poll.
func (p *pump) polled(ctx context.Context, key string, n int) {
	if p.watch != nil && n%heldEvery != 0 && p.sessions.cached(key) != nil {
		return
	}
	p.key(ctx, key, n%claimEvery == 0)
}

// down reports whether err (of listing the inbox's keys) means the shared
// inbox cannot be read now. The outage logs what changes (cluster_outage.go); an
// error that is not the store unreachable is logged when it begins and
// ends: Redis down for a minute is a few lines, not three hundred.
func (p *pump) down(err error) bool {
	switch {
	case err == nil:
		p.outage.ok()
		if p.failing {
			p.failing = false
			p.log.Info("inbox readable again")
		}
	case p.outage != nil && unreachable(err):
		p.outage.fail("inbox: list keys", err)
	case !p.failing:
		p.failing = true
		p.log.Error("inbox unreadable; no items are taken until it answers", "err", err)
	}
	return err != nil
}

// silence stops r without a word more to the chat and without recording
// anything: another replica holds its session now and answers.
func (r *run) silence() {
	r.silent.Store(true) // before anything else: emit drops what follows
	r.frozen.Store(true)
	r.cancel() // ends its stream's loop before another step
	r.interrupt("")
}
