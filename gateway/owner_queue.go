package gateway

import (
	"context"
	"strings"
	"time"

	"github.com/pibot/pibot/agent"
)

// Queue modes: what happens to a message sent while the agent works.
const (
	modeSteer     = "steer"     // inject at the next turn boundary
	modeFollowup  = "followup"  // run after the current run ends
	modeCollect   = "collect"   // debounce, merge, then follow up
	modeInterrupt = "interrupt" // abort the run, then run the new message
)

var queueModes = []string{modeSteer, modeFollowup, modeCollect, modeInterrupt}

// queue applies the queue modes of an owner's locations to the messages
// that arrive there: it starts a run, feeds the active one, collects,
// interrupts, parks a message for the next run, and drops or lists what
// waits. It works under its owner's lock.
type queue struct{ o *owner }

// collectLocked buffers p and (re)arms the debounce timer. o.mu is held;
// the returned func tells the users what happened and must be called
// once it is released (it may send).
func (q queue) collectLocked(loc *location, p *pending) (after func()) {
	o := q.o
	dropped, kept := loc.waits.addCollected(p, o.cfg.CollectCap, o.cfg.CollectDrop == "new")
	// The window's end is work of the location: it waits its turn in the
	// mailbox. Once the gateway shuts down the mailbox takes nothing and
	// the collected messages stay in the inbox for the next start.
	loc.waits.rearm(o.cfg.CollectDebounce, func() {
		o.post(loc.key, func() { q.flushCollect(loc) })
	})
	return func() {
		if dropped != nil {
			q.drop(dropped, "the collect queue is full")
		}
		if kept {
			o.replier.queued(context.Background(), p, "📥 collected")
		}
	}
}

// flushCollect merges the collected messages into one follow-up.
func (q queue) flushCollect(loc *location) {
	o := q.o
	o.mu.Lock()
	ps := loc.waits.takeCollected()
	r := loc.run
	closed := o.closed
	o.mu.Unlock()
	if len(ps) == 0 || closed {
		return
	}
	merged := mergePending(ps)
	if r != nil {
		q.enqueue(r, merged, false)
		return
	}
	o.runs.start(loc, []*pending{merged}, nil)
}

// mergePending joins messages into one, keeping the last one's identity
// and every inbox id.
func mergePending(ps []*pending) *pending {
	if len(ps) == 1 {
		return ps[0]
	}
	last := *ps[len(ps)-1]
	var texts []string
	var extra []inboxRef
	for _, p := range ps {
		texts = append(texts, p.item.In.Text)
		if p != ps[len(ps)-1] {
			extra = append(extra, p.inbox)
			extra = append(extra, p.extra...)
			last.item.In.Files = append(last.item.In.Files, p.item.In.Files...)
		}
	}
	last.item.In.Text = strings.Join(texts, "\n\n")
	last.extra = append(extra, last.extra...)
	last.inbox.begun = false // the inbox is told of all of them
	return &last
}

// drop discards a queued message, telling the user why. Its inbox item is
// acknowledged: dropping it is the decision.
func (q queue) drop(p *pending, reason string) {
	o := q.o
	ctx := context.Background()
	o.metrics.dropped()
	o.replier.react(ctx, p.item.In.Msg, "❌")
	if p.note != nil && p.note.shown() {
		o.replier.settleNote(ctx, p, "❌ dropped: "+reason) // the notice says it
	} else {
		o.replier.reply(ctx, p.item.In, "_❌ dropped: "+reason+"_")
	}
	o.ack(ctx, []*pending{p})
}

// dropQueued discards everything queued at loc and returns how many.
func (q queue) dropQueued(loc *location) int {
	o := q.o
	o.mu.Lock()
	ps := loc.waits.takeAll()
	r := loc.run
	o.mu.Unlock()
	if a := runAgent(r); a != nil {
		st, fu := a.ClearTagged()
		ps = append(ps, r.msgs.untag(append(st, fu...))...)
	}
	for _, p := range ps {
		q.drop(p, "/queue drop")
	}
	return len(ps)
}

// queuedTexts lists what waits at loc.
func (q queue) queuedTexts(loc *location) []string {
	o := q.o
	o.mu.Lock()
	out := loc.waits.texts()
	r := loc.run
	o.mu.Unlock()
	if a := runAgent(r); a != nil {
		st, fu := a.Queued()
		for _, m := range st {
			out = append(out, "steer: "+m.Text())
		}
		for _, m := range fu {
			out = append(out, "follow-up: "+m.Text())
		}
	}
	return out
}

// runAgent returns r's agent, or nil when there is no run or it is not set
// up yet.
func runAgent(r *run) *agent.Agent {
	if r == nil {
		return nil
	}
	return r.agent.Load()
}

// accept takes a durable message for loc and applies the queue mode.
// take, if not nil, is the offer of the mailbox goroutine p's item is
// executed on: a run p starts at once runs there (runStarter.launch).
func (q queue) accept(ctx context.Context, loc *location, p *pending, take takeOver) {
	o := q.o
	// Insert-if-absent: a redelivered message already in the session (the
	// platform retried after a crash, or an inbox replay) is not applied
	// twice.
	resume := p.item.Resume
	if key := p.msgKey(); key != "" && !resume {
		_, resume = o.sess.Tree().EntryForMsg(key)
	}
	if resume {
		o.mu.Lock()
		r := loc.run
		idle := r == nil && !o.closed
		o.mu.Unlock()
		switch {
		case idle:
			// Exactly one visible answer: a recorded delivery means the
			// chat has it; answers in the session that never reached the
			// chat are sent now; a run cut short is finished (recover_replay.go).
			q.replay(ctx, loc, p, take)
		case r != nil && q.joinRun(r, p):
			// The run working here answers after it: the message leaves
			// the inbox with the run's.
		default:
			// Its run is in the session: it leaves the inbox once that is
			// durable (a redelivery may come while the run's last lines
			// wait for the group commit).
			o.durable.ack(ctx, []*pending{p})
		}
		return
	}
	o.mu.Lock()
	if o.closed {
		// Evicted between routing and now: route again.
		o.mu.Unlock()
		o.route(ctx, p, take)
		return
	}
	mode := p.item.Mode
	if mode == "" {
		mode = loc.mode
	}
	r := loc.run
	if mode == modeCollect || r != nil {
		p.queued = true
	}
	if mode == modeCollect {
		after := q.collectLocked(loc, p)
		o.mu.Unlock()
		after()
		return
	}
	if r == nil {
		o.mu.Unlock()
		o.runs.start(loc, []*pending{p}, take)
		return
	}
	// The notice's state exists before a run can take the message.
	switch mode {
	case modeInterrupt:
		p.note = &queueNote{}
		loc.waits.addNext(p)
		r.interrupt("interrupted by a newer message")
		o.mu.Unlock()
		o.replier.queued(ctx, p, "⏭ interrupting the current run")
	case modeFollowup:
		o.mu.Unlock()
		p.note = &queueNote{run: r}
		if q.enqueue(r, p, false) {
			o.replier.queued(ctx, p, "📥 queued as a follow-up")
		}
	default:
		o.mu.Unlock()
		p.note = &queueNote{run: r, steer: true}
		if q.enqueue(r, p, true) {
			o.replier.queued(ctx, p, "📥 will steer the current run")
		}
	}
}

// park hands p to whatever runs next at r's location: the waiting list
// while r is still the location's run, else a run of its own. It runs in
// the location's mailbox (enqueue is called only there), so p keeps its
// place before what arrived after it.
func (q queue) park(r *run, p *pending) {
	o := q.o
	o.mu.Lock()
	if r.loc.run == r {
		r.loc.waits.addNext(p)
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	q.accept(context.WithoutCancel(r.ctx), r.loc, p, nil)
}

// enqueue adds a message to the active run's steering or follow-up queue
// and reports whether it waits for that run (the sender is told so). A
// run that is ending takes no more: the message starts the next run.
func (q queue) enqueue(r *run, p *pending, steer bool) bool {
	a, ctl := r.agent.Load(), r.reply.controller()
	o := q.o
	o.mu.Lock()
	behind := r.loc.waits.hasNext()
	o.mu.Unlock()
	if a == nil || behind {
		// The run is still starting, or messages that came while it was
		// wait for the next run: this one runs after them, in the order
		// they were sent.
		q.park(r, p)
		return true
	}
	t := tagged(p, userMessage(r.ctx, r.o.receiveFile, r.wt.uploads(), p, time.Now().UnixMilli()))
	fed := r.gate.pass(func() {
		r.msgs.wait(p)
		if steer {
			a.SteerTagged(t)
		} else {
			a.FollowUpTagged(t)
		}
	})
	if !fed {
		// The run has answered and takes nothing more: the message starts
		// the next run, so nobody is told it steers this one.
		p.queued = false
		q.park(r, p)
		return false
	}
	if ctl != nil {
		st, fu := a.Queued()
		ctl.Status(plural(len(st)+len(fu), "queued message"))
	}
	return true
}
