package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Redis outage of two and a half minutes, during which the pump's poll
// (every 200 ms) and some messages fail on it, is logged as its start
// (with the error), a summary each minute (what failed since), and its
// end with its length: three WARN lines and one INFO line, not one per
// failure. The adapters are shown the problem once and its end once.
func TestOutageLogsChangesAndSummaries(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var shown []string
	o := &outage{
		log: slog.New(slog.NewTextHandler(&buf, nil)),
		now: func() time.Time { return now },
		show: func(p string) {
			mu.Lock()
			shown = append(shown, p)
			mu.Unlock()
		},
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	o.ok() // up: nothing to say
	const step = 200 * time.Millisecond
	failed := 0
	for at := time.Duration(0); at < 150*time.Second; at += step {
		o.fail("inbox: list keys", fmt.Errorf("rediscluster: inbox keys: %w", refused))
		failed++
		if at%(10*time.Second) == 0 {
			o.fail("admit: event refused", fmt.Errorf("rediscluster: admit: %w", refused))
			failed++
		}
		if got := o.problem(); got != storeProblem {
			t.Fatalf("at %v the problem shown is %q", at, got)
		}
		now = now.Add(step)
	}
	// It answers, fails once more (a client still failing fast), then
	// answers for good: the outage ends outageOverAfter after that.
	o.ok()
	now = now.Add(time.Second)
	o.fail("admit: event refused", refused)
	failed++
	for range 10 {
		o.ok()
		if o.problem() != storeProblem {
			t.Fatalf("over at %v, before the store answered for %v", now, outageOverAfter)
		}
		now = now.Add(outageOverAfter / 10)
	}
	o.ok()
	o.ok()
	if o.problem() != "" {
		t.Fatal("not over after the store answered long enough")
	}
	log := buf.String()
	if n := strings.Count(log, "level=WARN"); n != 3 {
		t.Errorf("%d WARN lines over the outage, want 3 (down, two summaries):\n%s", n, log)
	}
	for _, want := range []string{
		`msg="shared store (Redis) unreachable; messages are refused until it answers" op="inbox: list keys" err="rediscluster: inbox keys: dial tcp: connection refused"`,
		`msg="shared store (Redis) still unreachable" for=1m0s failed=306`,
		`msg="shared store (Redis) still unreachable" for=2m0s failed=306`,
		fmt.Sprintf(`level=INFO msg="shared store (Redis) reachable again; taking messages" down=2m31s failed=%d`, failed),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Count(log, "\n") != 4 {
		t.Errorf("want 4 lines:\n%s", log)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(shown) != fmt.Sprint([]string{storeProblem, ""}) {
		t.Errorf("shown %q, want the problem then its end", shown)
	}
}

// Only an unreachable store is an outage: an error Redis answered with is
// logged on its own, and outside cluster mode (no outage) every error is.
func TestOutageReport(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	tests := []struct {
		name     string
		cluster  bool
		err      error
		wantDown bool
		wantWarn bool
	}{
		{"refused in cluster mode", true, fmt.Errorf("x: %w", refused), true, true},
		{"timeout in cluster mode", true, fmt.Errorf("x: %w", errDeadline()), true, true},
		{"an answer in cluster mode", true, errors.New("ERR script failed"), false, true},
		{"refused, single process", false, refused, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			var o *outage
			if tt.cluster {
				o = &outage{log: log, now: time.Now}
			}
			o.report(log, "op", tt.err)
			if got := o.problem() != ""; got != tt.wantDown {
				t.Errorf("down = %v, want %v", got, tt.wantDown)
			}
			if got := strings.Count(buf.String(), "level=WARN") == 1; got != tt.wantWarn {
				t.Errorf("log:\n%s", buf.String())
			}
		})
	}
}

// errDeadline is a call that ran out of time.
func errDeadline() error {
	ctx, cancel := contextWithDeadlinePassed()
	defer cancel()
	<-ctx.Done()
	return ctx.Err()
}

func contextWithDeadlinePassed() (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.Background(), time.Unix(0, 0))
}
