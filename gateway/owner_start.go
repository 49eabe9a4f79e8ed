package gateway

import (
	"context"
	"time"

	"github.com/pibot/pibot/chat"
)

// runStarter starts the agent runs of one owner's locations: it installs
// a run as its location's run (or leaves the messages for the next run
// when one is active), puts the run on a goroutine the gateway waits for,
// and when the run ends hands what waits at the location to the next run.
// A run whose message was routed by a mailbox item runs on that item's
// goroutine when the item offers it (takeOver, mailbox.go), so the run is
// not handed to a new goroutine that would wait its turn behind every
// runnable one. It works under its owner's lock.
type runStarter struct {
	o *owner
	// track runs f on a new goroutine the gateway waits for
	// (workGroup.track).
	track func(f func(context.Context))
	// trackHere runs f on the calling goroutine, the gateway waiting for
	// it as for track's, once take gave the goroutine over; it reports
	// whether it did (workGroup.trackHere).
	trackHere func(take takeOver, f func(context.Context)) bool
	// runContext is the parent of every run (workGroup.context).
	runContext func() context.Context
}

// start starts an agent run for loc with the given prompts (none:
// continue from the session). take, if not nil, is the offer of the
// mailbox goroutine the caller runs on: the run runs there if it can
// (launch).
func (s runStarter) start(loc *location, ps []*pending, take takeOver) {
	s.startWith(loc, ps, nil, nil, take)
}

// startWith is start with a prelude and resumes: prelude, if set, runs
// first inside the run (with the reply started) and may end it by
// returning false; resumes, if set, are the chat messages of a reply the
// run takes over (see stream.Options.Continue).
func (s runStarter) startWith(loc *location, ps []*pending, prelude func(context.Context, *run) bool, resumes []chat.MsgRef, take takeOver) {
	o := s.o
	parent := s.runContext()
	r := s.newRun(parent, loc, prelude)
	r.reply.resumes = resumes
	o.mu.Lock()
	if o.closed {
		// Evicted since routing: route the messages again. Their runs
		// get goroutines of their own (ps may be several messages).
		o.mu.Unlock()
		r.cancel()
		for _, p := range ps {
			o.route(parent, p, nil)
		}
		return
	}
	if loc.run != nil {
		loc.waits.addNext(ps...)
		o.mu.Unlock()
		r.cancel()
		return
	}
	loc.run = r
	o.mu.Unlock()
	s.launch(r, ps, take)
}

// newRun makes a run for loc that is not started yet; parent is the
// gateway's run context (taken before o.mu: the gateway's lock is never
// taken under an owner's).
func (s runStarter) newRun(parent context.Context, loc *location, prelude func(context.Context, *run) bool) *run {
	ctx, cancel := context.WithCancel(parent)
	return newRunAt(ctx, cancel, s.o, loc, prelude)
}

// launch starts r, already installed as its location's run, on a
// goroutine the gateway waits for: the caller's, when take (a mailbox
// item's offer) gives it over because nothing else waits at the location,
// else a new one.
func (s runStarter) launch(r *run, ps []*pending, take takeOver) {
	run := func(context.Context) {
		growRunStack()
		defer r.cancel()
		r.execute(ps)
		s.afterRun(r.loc, r)
	}
	if take != nil && s.trackHere(take, run) {
		return
	}
	s.track(run)
}

// afterRun clears the run and starts the next one if messages wait.
func (s runStarter) afterRun(loc *location, r *run) {
	o := s.o
	if r.journal.frozen() {
		// Shutdown: unrecorded messages are still in the inbox, so the
		// restart resumes this run.
		o.mu.Lock()
		loc.run = nil
		o.mu.Unlock()
		return
	}
	r.gate.close()
	steer, follow := r.agent.Load().ClearTagged()
	left := r.msgs.untag(append(steer, follow...))
	parent := s.runContext()
	o.mu.Lock()
	loc.run = nil
	next := append(left, loc.waits.takeNext()...)
	o.lastUsed = time.Now()
	// The waiting messages take the location over in the same step, so a
	// message the mailbox accepts meanwhile queues behind them.
	var nr *run
	if len(next) > 0 && !o.closed {
		nr = s.newRun(parent, loc, nil)
		loc.run = nr
	}
	o.mu.Unlock()
	// Waiting messages do not wait for the disk. The next run gets a
	// goroutine of its own: this one still acknowledges below.
	switch {
	case nr != nil:
		s.launch(nr, next, nil)
	case len(next) > 0:
		s.start(loc, next, nil) // the owner closed: routed again
	}
	// The run is over: its lines go into the file now (a crash of pibot
	// keeps them), and its messages leave the inbox once the session's
	// next fsync has them (owner_durable.go). Until then a crash replays them
	// and resumes the run.
	o.durable.ack(context.WithoutCancel(r.ctx), r.msgs.finished())
}
