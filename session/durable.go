package session

import "sync"

// durableWaits holds the callbacks of Session.OnDurable until the appends
// they wait for are durable, or the writer failed.
type durableWaits struct {
	mu    sync.Mutex
	upTo  uint64 // appends known durable
	err   error  // why no later flush will come (fenced, failed, closed)
	queue []durableWait
}

// durableWait is one callback: it waits for the first mark appends.
type durableWait struct {
	mark uint64
	fn   func(error)
}

// add queues fn for the first mark appends, or runs it at once (outside
// the lock) when they are durable already or never will be.
func (d *durableWaits) add(mark uint64, fn func(error)) {
	d.mu.Lock()
	var err error
	switch {
	case mark <= d.upTo:
	case d.err != nil:
		err = d.err
	default:
		d.queue = append(d.queue, durableWait{mark: mark, fn: fn})
		d.mu.Unlock()
		return
	}
	d.mu.Unlock()
	fn(err)
}

// advance records that the first upTo appends are durable. The callbacks
// it satisfies run at the next settle.
func (d *durableWaits) advance(upTo uint64) {
	d.mu.Lock()
	d.upTo = max(d.upTo, upTo)
	d.mu.Unlock()
}

// fail records that no flush will come any more: every callback still
// waiting at the next settle gets err. The first failure is kept.
func (d *durableWaits) fail(err error) {
	d.mu.Lock()
	if d.err == nil {
		d.err = err
	}
	d.mu.Unlock()
}

// settle runs the callbacks whose appends are durable (with nil) and, once
// the writer failed, every other one (with the failure). It runs them on
// the caller's goroutine, under none of the session's locks, in the order
// they were added.
func (d *durableWaits) settle() {
	d.mu.Lock()
	if len(d.queue) == 0 {
		d.mu.Unlock()
		return
	}
	var due []durableWait
	kept := d.queue[:0]
	for _, w := range d.queue {
		if w.mark <= d.upTo || d.err != nil {
			due = append(due, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(d.queue[len(kept):])
	d.queue = kept
	upTo, err := d.upTo, d.err
	d.mu.Unlock()
	for _, w := range due {
		if w.mark <= upTo {
			w.fn(nil)
		} else {
			w.fn(err)
		}
	}
}

// OnDurable calls fn once every entry appended before the call is durable:
// with nil after the fsync that covers them (a group commit, Flush, an
// Append with SyncAlways or Close), at once when they are durable already.
// If the writer is fenced, or a write or fsync fails, or the session is
// closed, before they are durable, fn gets that error instead (a
// *FencedError unless closed). fn runs once, on the goroutine that made
// the entries durable or failed, under none of the session's locks; it
// should not block for long and must not call Close (a group commit, and
// Close, wait for it).
func (s *Session) OnDurable(fn func(error)) { s.w.onDurable(fn) }

// onDurable is Session.OnDurable.
func (s *sink) onDurable(fn func(error)) {
	s.wmu.Lock()
	mark := s.writes
	s.wmu.Unlock()
	s.waits.add(mark, fn)
}
