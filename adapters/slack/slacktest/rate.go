package slacktest

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// DefaultLimits are the fake's per-minute limits per method across the
// workspace (Slack's tiers: chat.update Tier 3, chat.appendStream Tier 4);
// chat.postMessage is limited per channel (about one a second, burst 3).
var DefaultLimits = map[string]float64{
	"chat.update":       50,
	"chat.delete":       50,
	"chat.startStream":  50,
	"chat.appendStream": 100,
	"chat.stopStream":   50,
	"reactions.add":     50,
	"chat.postMessage":  60, // per channel
}

// rateModel answers 429 when a method's bucket is empty, and remembers
// the Retry-After windows it announced.
type rateModel struct {
	limits map[string]float64

	mu      sync.Mutex
	buckets map[string]*bucket
	windows map[string]time.Time // method → end of the announced window
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateModel(limits map[string]float64) *rateModel {
	if limits == nil {
		limits = DefaultLimits
	}
	return &rateModel{limits: limits, buckets: map[string]*bucket{}, windows: map[string]time.Time{}}
}

// take spends a token of method (per channel for chat.postMessage) and
// returns 0, or the Retry-After to answer, which it announces.
func (r *rateModel) take(method, channel string) time.Duration {
	perMin := r.limits[method]
	if perMin <= 0 {
		return 0
	}
	key, burst := method, math.Max(3, perMin/20)
	if method == "chat.postMessage" {
		key, burst = method+"/"+channel, 3
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	b := r.buckets[key]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		r.buckets[key] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*perMin/60)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	ra := time.Duration(math.Ceil((1-b.tokens)/(perMin/60))) * time.Second
	r.windows[method] = now.Add(ra)
	return ra
}

// announce records a Retry-After window answered for method.
func (r *rateModel) announce(method string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows[method] = time.Now().Add(d)
}

// inWindow describes a call of method inside its announced window, "" if
// it is not in one.
func (r *rateModel) inWindow(method string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.windows[method]
	if left := time.Until(end); left > 0 {
		return fmt.Sprintf("%s called %s before its Retry-After window ended", method, left.Round(time.Millisecond))
	}
	return ""
}
