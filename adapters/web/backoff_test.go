package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/internal/secret"
)

// TestWrongTokenBackOff replays a token-guessing client against the real
// handler: after a few wrong tokens its address is locked out with 429
// (even a right guess is refused while locked), the lock-out doubles, other
// addresses are unaffected, and a right token after the lock-out ends it.
// Time is synctest's.
func TestWrongTokenBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAdapter(t, Config{Token: secret.New("0123456789abcdef-right")})
		h := a.Handler()
		do := func(remote, target, bearer string) *httptest.ResponseRecorder {
			req := httptest.NewRequest("GET", "http://pi.example:8080"+target, nil)
			req.RemoteAddr = remote
			if bearer != "" {
				req.Header.Set("Authorization", "Bearer "+bearer)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			return w
		}
		const attacker, other = "203.0.113.7:4711", "198.51.100.2:5000"
		for i := range freeFailures {
			if w := do(attacker, "/", fmt.Sprintf("guess-%d", i)); w.Code != http.StatusUnauthorized {
				t.Fatalf("wrong token %d: status %d, want 401", i+1, w.Code)
			}
		}
		w := do(attacker, "/?token=guess-query", "")
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
			t.Fatalf("wrong token %d: status %d Retry-After %q, want 429 after 1s", freeFailures+1, w.Code, w.Header().Get("Retry-After"))
		}
		if w := do(attacker, "/", "0123456789abcdef-right"); w.Code != http.StatusTooManyRequests {
			t.Fatalf("right token while locked out: status %d, want 429", w.Code)
		}
		if w := do(other, "/", "0123456789abcdef-right"); w.Code != http.StatusOK {
			t.Fatalf("another address: status %d, want 200", w.Code)
		}
		if w := do(other, "/", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("another address without token: status %d, want 401", w.Code)
		}
		// The next failure after the lock-out locks for twice as long.
		time.Sleep(time.Second)
		if w := do(attacker, "/", "guess-again"); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
			t.Fatalf("after the lock-out, wrong again: status %d Retry-After %q, want 429 for 2s", w.Code, w.Header().Get("Retry-After"))
		}
		time.Sleep(2 * time.Second)
		if w := do(attacker, "/", "0123456789abcdef-right"); w.Code != http.StatusOK {
			t.Fatalf("right token after the lock-out: status %d, want 200", w.Code)
		}
		// The right token forgave the address.
		if w := do(attacker, "/", "one-more-guess"); w.Code != http.StatusUnauthorized {
			t.Fatalf("after a right token: status %d, want 401", w.Code)
		}
	})
}

// TestWrongTokenTableIsBounded: addresses that never come back do not grow
// the table beyond maxTracked, and IPv6 clients count per /64.
func TestWrongTokenTableIsBounded(t *testing.T) {
	f := newFailures()
	now := time.Now()
	for i := range maxTracked + 500 {
		f.fail(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(f.addrs); n > maxTracked {
		t.Fatalf("tracking %d addresses, want at most %d", n, maxTracked)
	}
	r1 := &http.Request{RemoteAddr: "[2001:db8:1:2:aaaa::1]:443"}
	r2 := &http.Request{RemoteAddr: "[2001:db8:1:2:bbbb::9]:443"}
	if clientKey(r1) != clientKey(r2) {
		t.Fatalf("one /64 counted as two clients: %s, %s", clientKey(r1), clientKey(r2))
	}
}
