package gateway

import "time"

// resyncs brings the pump back, soon and on its own, to the keys whose
// last take failed. A take (an admission that takes, a Consume, a Claim)
// that fails may have run in Redis all the same, its answer lost: then
// it took the key's items for this process, other replicas' among them,
// and only the next take of the key hands them over (the inbox's given
// items, rediscluster/given.go). A conversation may go quiet after the
// lost answer, and the poll of a held key may be far off, so the pump
// takes the key again after a short wait, waiting twice as long after
// each failure (Redis down) up to resyncMax. A failed claim is retried
// as a claim: what it may have taken from other consumers is older than
// what a consume reads again.
//
// request may be called from any goroutine; the rest belongs to the
// pump's run goroutine, whose failed takes schedule directly.
type resyncs struct {
	asks   chan string
	due    map[string]time.Time
	claims map[string]bool // due keys to claim, not consume
	wait   map[string]time.Duration
	timer  *time.Timer
}

// resync is a key due to be taken again, and whether by a claim.
type resync struct {
	key   string
	claim bool
}

// resyncFirst and resyncMax bound the wait before a key is taken again.
const (
	resyncFirst = 50 * time.Millisecond
	resyncMax   = 5 * time.Second
)

// newResyncs returns resyncs whose requests queue up (the zero value
// drops them, leaving the keys to the poll).
func newResyncs() resyncs { return resyncs{asks: make(chan string, 256)} }

// fire is the timer's channel (nil, never ready, before the first
// schedule).
func (r *resyncs) fire() <-chan time.Time {
	if r.timer == nil {
		return nil
	}
	return r.timer.C
}

// stop stops the timer, once the run loop ends.
func (r *resyncs) stop() {
	if r.timer != nil {
		r.timer.Stop()
	}
}

// request asks for key to be taken again soon: a take of it failed.
func (r *resyncs) request(key string) {
	select {
	case r.asks <- key:
	default: // a flood of failures: the poll takes the key again
	}
}

// schedule sets key's next take, a claim if claim (run's goroutine).
func (r *resyncs) schedule(key string, now time.Time, claim bool) {
	if r.due == nil {
		r.due, r.claims, r.wait = map[string]time.Time{}, map[string]bool{}, map[string]time.Duration{}
	}
	if claim {
		r.claims[key] = true
	}
	if _, ok := r.due[key]; ok {
		return
	}
	w := r.wait[key]
	switch {
	case w == 0:
		w = resyncFirst
	case w < resyncMax:
		w = min(2*w, resyncMax)
	}
	r.wait[key] = w
	r.due[key] = now.Add(w)
	r.arm(now)
}

// fired returns the keys due at now and rearms the timer for the rest
// (run's goroutine).
func (r *resyncs) fired(now time.Time) []resync {
	var keys []resync
	for key, at := range r.due {
		if !at.After(now) {
			keys = append(keys, resync{key: key, claim: r.claims[key]})
			delete(r.due, key)
			delete(r.claims, key)
		}
	}
	r.arm(now)
	return keys
}

// settle forgets key's failures once a take of it, done for fired, did
// not fail again (run's goroutine).
func (r *resyncs) settle(key string) {
	if _, again := r.due[key]; !again {
		delete(r.wait, key)
	}
}

// arm sets the timer to the earliest due key.
func (r *resyncs) arm(now time.Time) {
	if r.timer == nil {
		r.timer = time.NewTimer(time.Hour)
	}
	r.timer.Stop()
	var next time.Time
	for _, at := range r.due {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		r.timer.Reset(max(next.Sub(now), 0))
	}
}
