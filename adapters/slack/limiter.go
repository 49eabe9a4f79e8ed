package slack

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/tokenbucket"
)

// perMessagePerMin paces the calls that change one message (updates and
// the stop of a stream): one a second.
const perMessagePerMin = 60

// appendInterval paces the appends to one streamed message: a reply in a
// thread grows more than once a second, and one stream (75 a minute) stays
// under the workspace's pace of chat.appendStream (Tier 4: 100+ a minute;
// 80 in defaultTiers).
const appendInterval = 800 * time.Millisecond

// liveMaxWait is the longest a live call (an update, an append, a status)
// waits for its method's tokens; a longer wait is returned as a
// RateLimitError, so the stream controller keeps only the latest text.
const liveMaxWait = 1500 * time.Millisecond

// defaultTiers are the per-minute paces per method and workspace, a
// little under Slack's tiers (Tier 2: 20+, Tier 3: 50+, Tier 4: 100+ per
// minute). chat.postMessage is "special": about one per second per
// channel, which perChannel adds.
var defaultTiers = map[string]float64{
	"chat.postMessage":                     100,
	"chat.postEphemeral":                   100,
	"chat.update":                          45,
	"chat.delete":                          45,
	"chat.startStream":                     45,
	"chat.appendStream":                    80,
	"chat.stopStream":                      45,
	"assistant.threads.setStatus":          100,
	"reactions.add":                        45,
	"files.getUploadURLExternal":           18,
	"files.completeUploadExternal":         18,
	"auth.test":                            100,
	"apps.connections.open":                18,
	"conversations.history":                45,
	"response_url":                         100,
	"files.download":                       100,
	"chat.postMessage/channel":             60, // per channel, on top of the workspace pace
	"chat.startStream/channel":             60,
	"files.completeUploadExternal/channel": 60,
}

// limiter paces calls: per method a workspace-wide bucket (and per channel
// for posts), and a pause of a method after its 429.
type limiter struct {
	tiers  map[string]float64
	rates  tokenbucket.Rates
	shared tokenbucket.SharedPause // nil: a pause is this process's

	mu     sync.Mutex
	paused map[string]time.Time // method (team-wide) → end of its Retry-After window
}

func newLimiter(tiers map[string]float64, rates tokenbucket.Rates) *limiter {
	t := make(map[string]float64, len(defaultTiers))
	for k, v := range defaultTiers {
		t[k] = v
	}
	for k, v := range tiers {
		t[k] = v
	}
	if rates == nil {
		rates = tokenbucket.NewLocal(0.05)
	}
	shared, _ := rates.(tokenbucket.SharedPause)
	return &limiter{tiers: t, rates: rates, shared: shared, paused: map[string]time.Time{}}
}

// pauseKey is the key of method's pause in team in a SharedPause.
func pauseKey(team, method string) string { return "slack/" + team + "/" + method }

// pause stops every call of method in team for d: in this process at
// once, and on the other replicas through the shared pause. An error of
// the shared pause is returned (the pause holds here regardless).
func (l *limiter) pause(ctx context.Context, team, method string, d time.Duration) error {
	l.mu.Lock()
	k := team + "/" + method
	if until := time.Now().Add(d); until.After(l.paused[k]) {
		l.paused[k] = until
	}
	l.mu.Unlock()
	if l.shared == nil {
		return nil
	}
	if err := l.shared.Pause(ctx, pauseKey(team, method), d); err != nil {
		return fmt.Errorf("shared pause: %w", err)
	}
	return nil
}

// pausedFor is how long method is still paused in team in this process
// (a shared pause is asked with the tokens: acquire).
func (l *limiter) pausedFor(team, method string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.paused[team+"/"+method])
}

// acquire waits until the call o may go out, or returns a
// *chat.RateLimitError where a live call must not wait. The call takes a
// token of each bucket that paces it (its method in the workspace, its
// channel, its message), together, and waits out its method's pause (the
// replicas' shared one in the same step).
func (l *limiter) acquire(ctx context.Context, o op, live bool) error {
	team, channel, method := o.team, o.channel, o.method
	if err := l.waitPause(ctx, team, method, live); err != nil {
		return err
	}
	var (
		buckets []tokenbucket.Bucket
		scopes  []string
	)
	add := func(key string, perMin float64, scope string) {
		burst := int(math.Max(1, math.Min(5, perMin/10)))
		if scope == "message" {
			burst = 1
		}
		buckets = append(buckets, tokenbucket.Bucket{Key: key, PerSec: perMin / 60, Burst: burst})
		scopes = append(scopes, scope)
	}
	if perMin := l.tiers[method]; perMin > 0 {
		add("slack/"+team+"/"+method, perMin, "workspace")
	}
	if perMin := l.tiers[method+"/channel"]; perMin > 0 && channel != "" {
		add("slack/"+team+"/"+method+"/"+channel, perMin, "chat")
	}
	if o.msg != "" {
		key, perMin := "slack/"+team+"/msg/"+channel+"/"+o.msg, float64(perMessagePerMin)
		if method == "chat.appendStream" {
			key, perMin = key+"/append", float64(time.Minute/appendInterval)
		}
		add(key, perMin, "message")
	}
	pause := ""
	if l.shared != nil {
		pause = pauseKey(team, method)
	}
	if len(buckets) > 0 || pause != "" {
		if err := l.take(ctx, live, pause, buckets, scopes); err != nil {
			return err
		}
	}
	// A 429 in this process may have paused the method while this call
	// waited for tokens.
	return l.waitPause(ctx, team, method, live)
}

// waitPause waits out this process's pause of method in team, or returns
// it as a RateLimitError for a live call.
func (l *limiter) waitPause(ctx context.Context, team, method string, live bool) error {
	for {
		d := l.pausedFor(team, method)
		if d <= 0 {
			return nil
		}
		if live {
			return &chat.RateLimitError{RetryAfter: d, Scope: "bot"}
		}
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}

// take waits for a token of each of buckets and for the shared pause, or
// returns the wait as a RateLimitError (of the scope of the bucket that
// asked for it) where a live call must not wait that long; a live call
// never waits out a pause.
func (l *limiter) take(ctx context.Context, live bool, pause string, buckets []tokenbucket.Bucket, scopes []string) error {
	for {
		d, which, err := l.rates.TakeAll(ctx, pause, buckets)
		if err != nil {
			return fmt.Errorf("rates: %w", err)
		}
		if d <= 0 {
			return nil
		}
		scope := "bot" // the pause
		if which >= 0 && which < len(scopes) {
			scope = scopes[which]
		}
		if live && (which < 0 || d > liveMaxWait) {
			return &chat.RateLimitError{RetryAfter: d, Scope: scope}
		}
		if err := tokenbucket.Wait(ctx, d); err != nil {
			return err
		}
	}
}
