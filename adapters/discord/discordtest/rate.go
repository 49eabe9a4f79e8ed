package discordtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Limits is the fake's rate model: fixed windows per route bucket, as
// Discord reports them in X-RateLimit-* headers.
type Limits struct {
	// Messages is how many creates, edits and deletes of messages one
	// channel takes per MessagesWindow (Discord: about 5 per 5 s).
	Messages       int
	MessagesWindow time.Duration
	// Other is the limit of every other route bucket per OtherWindow.
	Other       int
	OtherWindow time.Duration
	// Global is the bot's limit per second over all routes (50).
	Global int
}

// DefaultLimits returns Discord's documented and observed limits.
func DefaultLimits() Limits {
	return Limits{Messages: 5, MessagesWindow: 5 * time.Second, Other: 50, OtherWindow: time.Second, Global: 50}
}

type bucket struct {
	start        time.Time
	used         int
	blockedUntil time.Time // the end of the last 429 this bucket answered
}

// limitFor returns the bucket key and its limit for a route.
func (s *Server) limitFor(name, major string) (string, int, time.Duration) {
	switch name {
	case "messages", "message":
		return "messages/" + major, s.Limits.Messages, s.Limits.MessagesWindow
	}
	return name + "/" + major, s.Limits.Other, s.Limits.OtherWindow
}

// rateCheck takes one call of a bucket. It writes the X-RateLimit-*
// headers and, when the bucket or the global limit is spent, a 429, and
// reports whether the call may proceed. The caller holds s.mu.
func (s *Server) rateCheckLocked(w http.ResponseWriter, name, major string) bool {
	now := time.Now()
	key, limit, window := s.limitFor(name, major)
	if limit <= 0 {
		return true
	}
	b := s.buckets[key]
	if b == nil || now.Sub(b.start) >= window {
		if b == nil {
			b = &bucket{}
			s.buckets[key] = b
		}
		b.start, b.used = now, 0
	}
	if now.Before(b.blockedUntil) {
		s.violations = append(s.violations, fmt.Sprintf("a call to %s inside its 429 window", key))
	}
	if now.Before(s.globalUntil) {
		s.violations = append(s.violations, "a call inside the global 429 window")
	}
	// The global limit: a one-second window.
	g := s.buckets["global"]
	if g == nil || now.Sub(g.start) >= time.Second {
		if g == nil {
			g = &bucket{}
			s.buckets["global"] = g
		}
		g.start, g.used = now, 0
	}
	resetAfter := window - now.Sub(b.start)
	sum := sha256.Sum256([]byte(name))
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Bucket", hex.EncodeToString(sum[:8]))
	h.Set("X-RateLimit-Reset-After", seconds(resetAfter))
	h.Set("X-RateLimit-Reset", seconds(time.Duration(now.Add(resetAfter).UnixNano())))
	if s.Limits.Global > 0 && g.used >= s.Limits.Global {
		ra := time.Second - now.Sub(g.start)
		s.globalUntil = now.Add(ra)
		h.Set("X-RateLimit-Global", "true")
		h.Set("X-RateLimit-Scope", "global")
		h.Set("Retry-After", strconv.Itoa(int(ra/time.Second)+1))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": ra.Seconds(), "global": true})
		return false
	}
	if b.used >= limit {
		b.blockedUntil = b.start.Add(window)
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Scope", "user")
		h.Set("Retry-After", strconv.Itoa(int(resetAfter/time.Second)+1))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": resetAfter.Seconds(), "global": false})
		return false
	}
	b.used++
	g.used++
	h.Set("X-RateLimit-Remaining", strconv.Itoa(limit-b.used))
	return true
}

// fault answers an injected fault, if one is queued for key. The caller
// holds s.mu.
func (s *Server) faultLocked(w http.ResponseWriter, key, major string) (int, bool) {
	q := s.faults[key]
	if len(q) == 0 {
		return 0, false
	}
	f := q[0]
	s.faults[key] = q[1:]
	ra := f.RetryAfter
	if ra <= 0 {
		ra = time.Second
	}
	switch f.Kind {
	case Fault5xx:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>"))
		return http.StatusBadGateway, true
	case Fault429Header:
		w.Header().Set("Retry-After", strconv.Itoa(int((ra+time.Second-1)/time.Second)))
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte("rate limited"))
		s.blockLocked(key, major, ra, false)
		return http.StatusTooManyRequests, true
	}
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(int((ra+time.Second-1)/time.Second)))
	h.Set("X-RateLimit-Limit", "5")
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Reset-After", seconds(ra))
	h.Set("X-RateLimit-Bucket", "fault")
	scope := "user"
	if f.Global {
		scope = "global"
		h.Set("X-RateLimit-Global", "true")
	}
	h.Set("X-RateLimit-Scope", scope)
	s.blockLocked(key, major, ra, f.Global)
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"message": "You are being rate limited.", "retry_after": ra.Seconds(), "global": f.Global})
	return http.StatusTooManyRequests, true
}

// blockLocked starts a 429 window for the route of key (or every route).
func (s *Server) blockLocked(key, major string, d time.Duration, global bool) {
	until := time.Now().Add(d)
	if global {
		s.globalUntil = until
		return
	}
	name := key[len(methodOf(key))+1:]
	bk, _, _ := s.limitFor(name, major)
	b := s.buckets[bk]
	if b == nil {
		b = &bucket{start: time.Now()}
		s.buckets[bk] = b
	}
	b.blockedUntil = until
}

func methodOf(key string) string {
	for i := range key {
		if key[i] == ' ' {
			return key[:i]
		}
	}
	return key
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
}
