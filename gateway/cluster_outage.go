package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"syscall"

	"github.com/pibot/pibot/chat"
	"sync"
	"time"
)

// outageSummaryEvery is how often a replica whose shared store (Redis)
// stays unreachable says so again in its log, with what failed meanwhile.
const outageSummaryEvery = time.Minute

// outageOverAfter is how long the shared store must answer, with no
// failure between, before an outage is over: a client (go-redis) fails
// calls fast for a moment after its dials failed, even once the server
// answers again, and an outage that flapped would be logged and shown as
// several.
const outageOverAfter = 2 * time.Second

// storeProblem is what the adapters that show pibot's state
// (chat.HealthShower: the web chat's header) show while the shared store
// is unreachable.
const storeProblem = "storage unavailable, retrying"

// outage follows whether the store the replicas share (Redis) answers,
// for the log and for the adapters that show it. Every operation that
// failed on it is counted here instead of logged on its own; the log gets
// the change to unreachable (with the first error), a summary every
// outageSummaryEvery while it lasts (the operations failed since the
// last line, the latest error), and the recovery with the outage's
// length. A Redis down for a minute is three lines, not one per failed
// call.
type outage struct {
	log *slog.Logger
	now func() time.Time
	// show tells the adapters the state: storeProblem, or "" once the
	// store answers again (nil: nobody shows it).
	show func(problem string)

	showMu sync.Mutex // serialises show calls (publish)

	mu     sync.Mutex
	down   bool
	since  time.Time // when it went down
	last   time.Time // when it was last logged
	answer time.Time // while down: since when it has answered (zero: it has not)
	failed int       // operations failed since the last line
	total  int       // operations failed in this outage
	err    error     // the latest failure
}

// fail records an operation (what, in a few words) that failed on the
// shared store with err.
func (o *outage) fail(what string, err error) {
	if o == nil {
		return
	}
	now := o.now()
	o.mu.Lock()
	o.failed++
	o.total++
	o.err = err
	o.answer = time.Time{}
	if !o.down {
		o.down, o.since, o.last = true, now, now
		o.failed, o.total = 0, 1
		o.mu.Unlock()
		o.log.Warn("shared store (Redis) unreachable; messages are refused until it answers", "op", what, "err", err)
		o.publish()
		return
	}
	if now.Sub(o.last) < outageSummaryEvery {
		o.mu.Unlock()
		return
	}
	failed, down := o.failed, now.Sub(o.since)
	o.last, o.failed = now, 0
	o.mu.Unlock()
	o.log.Warn("shared store (Redis) still unreachable", "for", down.Round(time.Second), "failed", failed, "err", err)
}

// ok records an operation that succeeded on the shared store: an outage
// ends once the store has answered for outageOverAfter with no failure
// between.
func (o *outage) ok() {
	if o == nil {
		return
	}
	now := o.now()
	o.mu.Lock()
	if !o.down {
		o.mu.Unlock()
		return
	}
	if o.answer.IsZero() {
		o.answer = now
	}
	if now.Sub(o.answer) < outageOverAfter {
		o.mu.Unlock()
		return
	}
	down, total := o.answer.Sub(o.since), o.total
	o.down, o.failed, o.total, o.err, o.answer = false, 0, 0, nil, time.Time{}
	o.mu.Unlock()
	o.log.Info("shared store (Redis) reachable again; taking messages", "down", down.Round(time.Millisecond), "failed", total)
	o.publish()
}

// publish shows the adapters the state as it is now: of two changes
// racing, the one published last reads the state after both.
func (o *outage) publish() {
	if o.show == nil {
		return
	}
	o.showMu.Lock()
	defer o.showMu.Unlock()
	o.show(o.problem())
}

// problem is what the adapters show now: storeProblem while the store is
// unreachable, else "".
func (o *outage) problem() string {
	if o == nil {
		return ""
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		return storeProblem
	}
	return ""
}

// report counts err, of the operation what on the shared store, against
// an outage when it says the store is unreachable; any other error (or
// any error when o is nil: not cluster mode) is a warning of its own.
func (o *outage) report(log *slog.Logger, what string, err error) {
	if o != nil && unreachable(err) {
		o.fail(what, err)
		return
	}
	log.Warn(what, "err", err)
}

// unreachable reports whether err says the shared store could not be
// reached or did not answer in time (a refused or broken connection, a
// timeout), rather than answered with an error.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// showHealth returns the show of an outage: it tells every adapter that
// shows pibot's state (chat.HealthShower) the problem; nil when none does.
func showHealth(adapters map[chat.Platform]chat.Adapter) func(problem string) {
	var shows []chat.HealthShower
	for _, a := range adapters {
		if s, ok := a.(chat.HealthShower); ok {
			shows = append(shows, s)
		}
	}
	if len(shows) == 0 {
		return nil
	}
	return func(problem string) {
		for _, s := range shows {
			s.ShowHealth(problem)
		}
	}
}
