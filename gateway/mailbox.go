package gateway

import (
	"sync"
	"time"
)

// mailboxes holds one mailbox per chat location (keyed by ConvRef.Key):
// a queue of work that one goroutine executes in order, the way
// tailscale's util/execqueue does. The goroutine exists only while its
// location has work; an idle location costs nothing. Every inbox item of
// a location (message, command, button press, resume), the end of its
// collect window and messages taken up again after a full disk go through
// it, so they are executed in the order they arrived, and one slow command
// (/compact waits for the model) holds up its own location only. A run
// hands its leftovers to the next run itself, under the owner's lock, so
// nothing the mailbox accepts meanwhile overtakes them.
//
// The gateway owns the goroutines: close refuses new work and wait
// returns once every queued item has run.
//
// An item may take its goroutine over (postTakeOver): a message whose run
// starts at once runs on the goroutine that routed it. Handed to a new
// goroutine, the run would wait behind every goroutine already waiting to
// run (at 1,000 busy conversations, the streams' token wake-ups), once
// more on the way from the message to the model.
type mailboxes struct {
	mu     sync.Mutex
	queues map[string][]func(take takeOver)
	closed bool
	wg     sync.WaitGroup
}

// takeOver is a mailbox item's offer of its goroutine to the work the item
// does: called, it ends the mailbox's hold on the goroutine if nothing
// waits behind the item, and reports whether it did (then the caller may
// run on as long as it needs, and the location takes new work on a
// goroutine of its own). Once it reported true it keeps doing so; if it
// had not by the time its item returned, it reports false. The work of an
// item passes it on explicitly, from intake.execute through Gateway.route
// and queue.accept to runStarter.launch, which alone calls it. nil offers
// nothing: work that is no mailbox item's (a timer, a run's end) starts
// its runs on goroutines of their own.
type takeOver func() bool

func newMailboxes() *mailboxes {
	return &mailboxes{queues: map[string][]func(take takeOver){}}
}

// post queues f on the mailbox of location key and reports whether it was
// taken; after close nothing is (the caller's inbox item stays pending and
// is replayed by the next start).
func (m *mailboxes) post(key string, f func()) bool {
	return m.postTakeOver(key, func(takeOver) { f() })
}

// postTakeOver is post for an item that may take its goroutine over: f
// may call take, which, if nothing else waits at the location, ends the
// mailbox's hold on the goroutine and reports true; the location then
// takes new work on a goroutine of its own, and f may run on as long as
// it needs (the gateway waits for it: f hands itself to Gateway.wg before
// it takes over). take reports false when work waits behind f.
func (m *mailboxes) postTakeOver(key string, f func(take takeOver)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	q, busy := m.queues[key]
	m.queues[key] = append(q, f)
	if !busy {
		m.wg.Add(1)
		go m.work(key)
	}
	return true
}

// work runs the queue of key until it is empty, or an item took the
// goroutine over, then ends.
func (m *mailboxes) work(key string) {
	for {
		m.mu.Lock()
		q := m.queues[key]
		if len(q) == 0 {
			delete(m.queues, key)
			m.mu.Unlock()
			m.wg.Done()
			return
		}
		f := q[0]
		q[0] = nil
		m.queues[key] = q[1:]
		m.mu.Unlock()
		taken, done := false, false // guarded by m.mu
		f(func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			if !taken && !done && len(m.queues[key]) == 0 {
				delete(m.queues, key)
				taken = true
				m.wg.Done()
			}
			return taken
		})
		m.mu.Lock()
		done = true // a late call takes nothing over
		m.mu.Unlock()
		if taken {
			return
		}
	}
}

// busy reports whether location key has work queued or running.
func (m *mailboxes) busy(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.queues[key]
	return ok
}

// close refuses new work; what is queued still runs.
func (m *mailboxes) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// wait returns once every mailbox goroutine has ended.
func (m *mailboxes) wait() { m.wg.Wait() }

// waitList is what waits at one location for a run besides its mailbox's
// work: the messages for the run after the active one (next: interrupt
// mode, messages the agent did not take, messages that came while a run
// was starting or ending) and the collect window (collect mode's buffer
// and its debounce timer). Together with the mailbox it is the
// location's queue. It belongs to its location and is guarded by the
// owner's lock: every method expects the caller to hold it.
type waitList struct {
	next    []*pending
	collect []*pending
	timer   *time.Timer
}

// addNext queues ps for the next run.
func (w *waitList) addNext(ps ...*pending) { w.next = append(w.next, ps...) }

// hasNext reports whether messages wait for the next run.
func (w *waitList) hasNext() bool { return len(w.next) > 0 }

// takeNext removes and returns what waits for the next run.
func (w *waitList) takeNext() []*pending {
	ps := w.next
	w.next = nil
	return ps
}

// addCollected buffers p in the collect window, at most limit messages:
// past it the newest (dropNew) or the oldest is dropped and returned. kept
// says whether p is still in the window.
func (w *waitList) addCollected(p *pending, limit int, dropNew bool) (dropped *pending, kept bool) {
	w.collect = append(w.collect, p)
	if n := len(w.collect); n > limit {
		if dropNew {
			dropped, w.collect = w.collect[n-1], w.collect[:n-1]
		} else {
			dropped, w.collect = w.collect[0], w.collect[1:]
		}
	}
	return dropped, len(w.collect) > 0 && w.collect[len(w.collect)-1] == p
}

// rearm restarts the collect window: end runs once d passes without
// another message.
func (w *waitList) rearm(d time.Duration, end func()) {
	w.stop()
	w.timer = time.AfterFunc(d, end)
}

// takeCollected ends the collect window and returns what it holds.
func (w *waitList) takeCollected() []*pending {
	ps := w.collect
	w.collect, w.timer = nil, nil
	return ps
}

// takeAll empties the list (the window first, then the next run's).
func (w *waitList) takeAll() []*pending {
	ps := append(w.collect, w.next...)
	w.collect, w.next = nil, nil
	w.stop()
	return ps
}

// texts describes what waits, for /queue list.
func (w *waitList) texts() []string {
	var out []string
	for _, p := range w.collect {
		out = append(out, "collect: "+p.item.In.Text)
	}
	for _, p := range w.next {
		out = append(out, "next: "+p.item.In.Text)
	}
	return out
}

// empty reports whether nothing waits.
func (w *waitList) empty() bool { return len(w.collect) == 0 && len(w.next) == 0 }

// stop stops the collect window's timer (the owner closes, or it is
// rearmed or emptied).
func (w *waitList) stop() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}
