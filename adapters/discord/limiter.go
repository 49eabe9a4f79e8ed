package discord

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxRoutes bounds the routes the limiter remembers.
const maxRoutes = 4096

// limiter keeps Discord's rate windows: per route (a 429, or a bucket whose
// X-RateLimit-Remaining reached 0 until its reset) and global (a global
// 429). No call goes out to a route inside its window.
type limiter struct {
	mu     sync.Mutex
	routes map[string]time.Time
	global time.Time
}

func newLimiter() *limiter { return &limiter{routes: map[string]time.Time{}} }

// wait returns how long a call to route must wait (0: it may go now).
func (l *limiter) wait(route string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	until := l.global
	if t := l.routes[route]; t.After(until) {
		until = t
	}
	if d := until.Sub(now); d > 0 {
		return d
	}
	return 0
}

// pause closes route (or every route) for d.
func (l *limiter) pause(route string, global bool, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	until := time.Now().Add(d)
	if global {
		if until.After(l.global) {
			l.global = until
		}
		return
	}
	l.setLocked(route, until)
}

func (l *limiter) setLocked(route string, until time.Time) {
	if len(l.routes) >= maxRoutes {
		now := time.Now()
		for k, t := range l.routes {
			if t.Before(now) {
				delete(l.routes, k)
			}
		}
	}
	if until.After(l.routes[route]) {
		l.routes[route] = until
	}
}

// resetPrecision is the precision of X-RateLimit-Reset-After (seconds
// with three decimals). Discord may round the reset to the nearest
// millisecond, down as well as up, so a bucket stays closed that much
// longer: a call sent at the rounded reset could reach Discord inside the
// old window and earn a 429.
const resetPrecision = time.Millisecond

// observe reads a successful answer's X-RateLimit-* headers: a bucket with
// no call left is closed until its reset.
func (l *limiter) observe(route string, h http.Header) {
	if h.Get("X-RateLimit-Remaining") != "0" {
		return
	}
	after, err := strconv.ParseFloat(h.Get("X-RateLimit-Reset-After"), 64)
	if err != nil || after <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setLocked(route, time.Now().Add(time.Duration(after*float64(time.Second))+resetPrecision))
}

// recent is a bounded set of ids already delivered (message and
// interaction ids), oldest evicted first.
type recent struct {
	mu    sync.Mutex
	max   int
	set   map[string]struct{}
	order []string
}

func newRecent(n int) *recent { return &recent{max: n, set: map[string]struct{}{}} }

// add records id and reports whether it is new.
func (r *recent) add(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.set[id]; ok {
		return false
	}
	r.set[id] = struct{}{}
	r.order = append(r.order, id)
	if len(r.order) > r.max {
		delete(r.set, r.order[0])
		r.order = r.order[1:]
	}
	return true
}

// forget removes id (its delivery failed: a replay may deliver it).
func (r *recent) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.set, id)
}

// shortHash names a secret (an interaction token) in keys and logs
// without revealing it.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}
