package stream

import (
	"context"
	"sync"
	"time"
)

// loop is a reply's publishing goroutine: it calls step when content
// changes (poke) or when the delay step returned has passed.
type loop struct {
	wake chan struct{} // content changed; capacity 1
	stop chan struct{} // closed by halt
	done chan struct{} // closed when the goroutine returns

	mu sync.Mutex
	// sleeping: the goroutine waits on its timer until wakeAt. A change
	// need not poke it when nothing can be due before then.
	sleeping bool
	wakeAt   time.Time
}

func newLoop() *loop {
	return &loop{
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// run calls step until halt or the end of ctx; step returns how long the
// loop may sleep before the next call, -1 for until the next poke.
func (l *loop) run(ctx context.Context, now func() time.Time, step func(context.Context) time.Duration) {
	defer close(l.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-l.wake:
		case <-t.C:
		}
		l.mu.Lock()
		l.sleeping = false
		l.mu.Unlock()
		d := step(ctx)
		l.mu.Lock()
		if d >= 0 {
			l.sleeping, l.wakeAt = true, now().Add(d)
			t.Reset(d)
		} else {
			t.Stop()
		}
		l.mu.Unlock()
	}
}

// sleepsUntil returns the time the sleeping loop wakes up by itself; ok is
// false when it is not sleeping on its timer.
func (l *loop) sleepsUntil() (t time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wakeAt, l.sleeping
}

// poke makes the loop call step soon.
func (l *loop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// halt stops the loop and, if it was started, waits for it to return.
func (l *loop) halt(started bool) {
	close(l.stop)
	if started {
		<-l.done
	}
}

// stopping reports whether halt was called.
func (l *loop) stopping() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}
