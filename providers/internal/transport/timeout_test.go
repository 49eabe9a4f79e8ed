package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// pipeTransport answers every request with headers at once and a body the
// test writes into.
type pipeTransport struct {
	ct string
	w  chan *io.PipeWriter
}

func (p pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	go func() {
		<-req.Context().Done()
		pw.CloseWithError(req.Context().Err())
	}()
	p.w <- pw
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {p.ct}}, Body: pr, Request: req}, nil
}

// stream sends the request through WithTimeouts and writes chunks into
// the body with the given gaps before each, then reads the whole body.
func stream(t *testing.T, ct string, to Timeouts, gaps []time.Duration, chunks []string) (string, error) {
	t.Helper()
	pt := pipeTransport{ct: ct, w: make(chan *io.PipeWriter, 1)}
	hc := WithTimeouts(&http.Client{Transport: pt}, "p", to)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://example.invalid/v1", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	pw := <-pt.w
	done := make(chan struct{})
	defer close(done)
	go func() {
		for i, c := range chunks {
			select {
			case <-time.After(gaps[i]):
			case <-done:
				return
			}
			if _, err := io.WriteString(pw, c); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestIdleResetsOnEveryEvent: a stream whose events keep coming, each
// within the idle timeout, is never cut however long it lasts in total;
// a gap longer than the timeout is, and so is a first event that comes
// too late. Time is synctest's, so the gaps are exact.
func TestIdleResetsOnEveryEvent(t *testing.T) {
	to := Timeouts{Connect: time.Second, FirstByte: 3 * time.Second, Idle: time.Second}
	ev := "data: {}\n\n"
	tests := []struct {
		name   string
		ct     string
		gaps   []time.Duration
		chunks []string
		phase  Phase // "" means the stream ends normally
	}{
		{"steady events", "text/event-stream", rep(20, 900*time.Millisecond), reps(20, ev), ""},
		{"slow first event", "text/event-stream", []time.Duration{2900 * time.Millisecond, 0}, []string{ev, ev}, ""},
		{"first event too late", "text/event-stream", []time.Duration{3100 * time.Millisecond}, []string{ev}, PhaseFirstByte},
		{"gap too long", "text/event-stream", []time.Duration{0, 500 * time.Millisecond, 1100 * time.Millisecond}, reps(3, ev), PhaseIdle},
		// Half an event is no sign of life: the wait runs from the last
		// complete one.
		{"event trickled in halves", "text/event-stream", []time.Duration{0, 600 * time.Millisecond, 600 * time.Millisecond},
			[]string{ev, "data: {", "}\n\n"}, PhaseIdle},
		{"keep-alive comments count", "text/event-stream", rep(5, 900*time.Millisecond), reps(5, ": ping\r\n\r\n"), ""},
		{"non-stream body, every read counts", "application/json", rep(5, 900*time.Millisecond), reps(5, "{"), ""},
		{"non-stream body stalls", "application/json", []time.Duration{0, 1100 * time.Millisecond}, reps(2, "{"), PhaseIdle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got, err := stream(t, tt.ct, to, tt.gaps, tt.chunks)
				if tt.phase == "" {
					if err != nil || got != strings.Join(tt.chunks, "") {
						t.Fatalf("stream = %q, %v; want all of it", got, err)
					}
					return
				}
				var te *TimeoutError
				if !errors.As(err, &te) || te.Phase != tt.phase || te.Provider != "p" {
					t.Fatalf("err = %v, want a %s timeout", err, tt.phase)
				}
			})
		})
	}
}

func rep(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

func reps(n int, s string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestTimeoutRetries: a connect timeout is retried like a refused
// connection; first-byte and idle timeouts end the call at once.
func TestTimeoutRetries(t *testing.T) {
	for _, tt := range []struct {
		phase Phase
		calls int
	}{{PhaseConnect, 3}, {PhaseFirstByte, 1}, {PhaseIdle, 1}} {
		c := &Client{Provider: "p", Retry: RetryPolicy{MaxRetries: 2, Sleep: func(context.Context, time.Duration) error { return nil }}}
		calls := 0
		err := c.Do(t.Context(), func(context.Context) error {
			calls++
			return c.Failure(nil, &TimeoutError{Provider: "p", Phase: tt.phase, After: time.Second})
		})
		if calls != tt.calls || err == nil || !strings.Contains(err.Error(), "timeouts."+string(tt.phase)) {
			t.Errorf("%s: calls %d (want %d), err %v", tt.phase, calls, tt.calls, err)
		}
	}
}
