package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/session"
)

// BenchmarkClusterTakeover measures the takeover of a session after a
// SIGKILL of its owner (issue #14, goal: under lease TTL + 2 s). Two real
// `pibot serve` replicas share a data directory and the real Redis at
// 127.0.0.1:6379 (random key prefix); one answers a first message and so
// holds the session's lease. Each op kills the owner with SIGKILL while
// it is idle and at once posts the next message to the survivor's
// webhook; it reports, from the kill:
//
//   - marker-*-s: until the survivor's pibot.lease entry (a new fence) is
//     in the session file;
//   - answer-*-s: until the survivor's reply to the message is visible in
//     the chat (its first draft or message).
//
// p50 and max over the ops, with ttl-s, the replicas' cluster.lease_ttl.
// The survivor then owns the session and a fresh replica is started, so
// the next op kills the survivor. Run with -benchtime Nx: every op waits
// about a TTL.
func BenchmarkClusterTakeover(b *testing.B) {
	for _, ttl := range []time.Duration{2 * time.Second, 15 * time.Second} {
		b.Run(fmt.Sprintf("lease_ttl=%v", ttl), func(b *testing.B) { benchTakeover(b, ttl) })
	}
}

func benchTakeover(b *testing.B, ttl time.Duration) {
	w := newClusterWorldAt(b, clusterRedis)
	w.leaseMs = ttl.Milliseconds()
	ac := w.replicas(2, replicaOpts{})
	a, c := ac[0], ac[1]
	path, owner, other := w.warmOwner(a, c)
	var answers, markers []time.Duration
	b.ResetTimer()
	for i := range b.N {
		before := len(leaseFences(b, path))
		text := fmt.Sprintf("after kill %d", i)
		owner.kill()
		t0 := time.Now()
		w.say(other, text)
		var marker, answer time.Duration
		for marker == 0 || answer == 0 {
			if time.Since(t0) > ttl+time.Minute {
				b.Fatalf("no takeover within %v of the kill (marker after %v, answer after %v)", ttl+time.Minute, marker, answer)
			}
			if marker == 0 && len(leaseFences(b, path)) > before {
				marker = time.Since(t0)
			}
			if answer == 0 && w.replyVisible(text) {
				answer = time.Since(t0)
			}
			time.Sleep(5 * time.Millisecond)
		}
		markers, answers = append(markers, marker), append(answers, answer)
		w.waitAnswered([]string{text}, 30*time.Second)
		if h := w.holder(path); h != replicaID(other) {
			b.Fatalf("lease held by %q after the takeover, want the survivor %q", h, replicaID(other))
		}
		b.StopTimer()
		owner, other = other, w.start()
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(answers)
	slices.Sort(markers)
	b.ReportMetric(answers[len(answers)/2].Seconds(), "answer-p50-s")
	b.ReportMetric(answers[len(answers)-1].Seconds(), "answer-max-s")
	b.ReportMetric(markers[len(markers)/2].Seconds(), "marker-p50-s")
	b.ReportMetric(markers[len(markers)-1].Seconds(), "marker-max-s")
	b.ReportMetric(ttl.Seconds(), "ttl-s")
	other.stop()
	owner.stop()
}

// replyVisible reports whether the bot's answer to text has begun to show
// in the chat: a draft or a message that quotes it.
func (w *clusterWorld) replyVisible(text string) bool {
	quote := "You said: " + text
	for _, d := range w.srv.Drafts(clusterChat) {
		if strings.Contains(d, quote) {
			return true
		}
	}
	return strings.Contains(w.said(), quote)
}

// leaseFences returns the fences of the pibot.lease entries of the
// session file at path, in file order.
func leaseFences(tb testing.TB, path string) []int64 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var fences []int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), session.CustomLease) {
			continue
		}
		var e struct {
			CustomType string `json:"customType"`
			Fence      int64  `json:"fence"`
		}
		// A line being written may be cut short: it counts once whole.
		if json.Unmarshal(line, &e) == nil && e.CustomType == session.CustomLease {
			fences = append(fences, e.Fence)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return fences
}
