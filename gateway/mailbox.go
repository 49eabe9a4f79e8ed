package gateway

import "sync"

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
type mailboxes struct {
	mu     sync.Mutex
	queues map[string][]func()
	closed bool
	wg     sync.WaitGroup
}

func newMailboxes() *mailboxes { return &mailboxes{queues: map[string][]func(){}} }

// post queues f on the mailbox of location key and reports whether it was
// taken; after close nothing is (the caller's inbox item stays pending and
// is replayed by the next start).
func (m *mailboxes) post(key string, f func()) bool {
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

// work runs the queue of key until it is empty, then ends.
func (m *mailboxes) work(key string) {
	defer m.wg.Done()
	for {
		m.mu.Lock()
		q := m.queues[key]
		if len(q) == 0 {
			delete(m.queues, key)
			m.mu.Unlock()
			return
		}
		f := q[0]
		q[0] = nil
		m.queues[key] = q[1:]
		m.mu.Unlock()
		f()
	}
}

// close refuses new work; what is queued still runs.
func (m *mailboxes) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
}

// wait returns once every mailbox goroutine has ended.
func (m *mailboxes) wait() { m.wg.Wait() }
