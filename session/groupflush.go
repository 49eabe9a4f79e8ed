package session

import (
	"sync"
	"time"
)

// groupFlush schedules a Session's group commit: one timer, armed by the
// first append after a flush, so an idle session costs no goroutine.
type groupFlush struct {
	mu      sync.Mutex
	window  time.Duration
	flush   func() // nil until the session is writable
	timer   *time.Timer
	stopped bool
	running sync.WaitGroup // an armed or running flush
}

// schedule arms the timer, unless it is armed already or stopped.
func (g *groupFlush) schedule() { g.scheduleIn(g.window) }

// scheduleIn arms the timer to fire after d, unless it is armed already
// or stopped.
func (g *groupFlush) scheduleIn(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || g.timer != nil || g.flush == nil {
		return
	}
	g.running.Add(1)
	g.timer = time.AfterFunc(d, func() {
		defer g.running.Done()
		g.mu.Lock()
		g.timer = nil
		g.mu.Unlock()
		g.flush()
	})
}

// stop cancels an armed flush, waits for one that runs, and makes later
// schedules do nothing.
func (g *groupFlush) stop() {
	g.mu.Lock()
	g.stopped = true
	if g.timer != nil && g.timer.Stop() {
		g.running.Done()
	}
	g.timer = nil
	g.mu.Unlock()
	g.running.Wait()
}
