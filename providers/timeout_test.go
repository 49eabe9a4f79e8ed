package providers

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/providertest"
)

// firstEvents returns the first n SSE events of a transcript.
func firstEvents(t *testing.T, file string, n int) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	evs := strings.SplitAfter(string(b), "\n\n")
	if len(evs) <= n {
		t.Fatalf("%s has only %d events", file, len(evs))
	}
	return strings.Join(evs[:n], "")
}

// lockedBuffer is a log sink safe for the SDK's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// silentListener accepts TCP connections in the kernel but never in
// the program: a TLS handshake with it never completes.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// TestProviderTimeouts replays hanging providers through the real SDK
// path of every API: a server that never completes the connection, one
// that never answers headers, one that sends headers and then nothing,
// and one that streams a few events and then stalls. Each call must end
// with an error naming the timeout that fired and the key to raise.
func TestProviderTimeouts(t *testing.T) {
	apis := []struct {
		api, file, path string
		events          int // events streamed before the stall
	}{
		{APIOpenAICompletions, "openai/testdata/cc_text.sse", "/v1", 3},
		{APIOpenAIResponses, "openai/testdata/rs_text.sse", "/v1", 4},
		{APIAnthropic, "anthropic/testdata/text.sse", "", 4},
	}
	cases := []struct {
		name  string
		phase string
		resp  func(t *testing.T, file string, n int) *providertest.Response // nil: no server, a silent listener
		text  bool                                                          // partial text was streamed
		retry bool                                                          // retried before the stream started
	}{
		{"never connects", "connect", nil, false, true},
		{"never answers headers", "first_byte", func(*testing.T, string, int) *providertest.Response {
			return &providertest.Response{Hang: true}
		}, false, false},
		{"headers then nothing", "first_byte", func(*testing.T, string, int) *providertest.Response {
			return &providertest.Response{Stall: true}
		}, false, false},
		{"stalls mid-stream", "idle", func(t *testing.T, file string, n int) *providertest.Response {
			return &providertest.Response{Body: firstEvents(t, file, n), Stall: true}
		}, true, false},
	}
	for _, a := range apis {
		for _, c := range cases {
			t.Run(a.api+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				base := "https://" + silentListener(t) + a.path
				var srv *providertest.Server
				if c.resp != nil {
					srv = providertest.NewServer(t, *c.resp(t, a.file, a.events))
					base = srv.URL + a.path
				}
				var logs lockedBuffer
				reg, err := NewRegistry([]Config{{Name: "slow", API: a.api, BaseURL: base, Models: []llm.ModelInfo{{ID: "m"}},
					Timeouts: Timeouts{Connect: 200 * time.Millisecond, FirstByte: 200 * time.Millisecond, Idle: 200 * time.Millisecond}}},
					Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
						Retry: RetryPolicy{MaxRetries: 1, Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}})
				if err != nil {
					t.Fatal(err)
				}
				m, err := reg.Model("slow/m")
				if err != nil {
					t.Fatal(err)
				}
				// The test's own deadline is the only bound on a hang.
				_, final := providertest.Collect(t, m.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.UserText("hi", 1)}}))
				if final.StopReason != llm.StopError {
					t.Fatalf("stop = %s, want error; text %q", final.StopReason, final.Text())
				}
				t.Log(final.ErrorMessage)
				key := "providers.slow.timeouts." + c.phase
				msg := final.ErrorMessage
				if !strings.HasPrefix(msg, "slow: ") || !strings.Contains(msg, "timed out") || !strings.Contains(msg, "200ms") ||
					!strings.Contains(msg, "raise "+key) {
					t.Fatalf("error = %q, want the provider, 'timed out', 200ms and 'raise %s'", msg, key)
				}
				for _, other := range []string{"connect", "first_byte", "idle"} {
					if other != c.phase && strings.Contains(msg, "timeouts."+other) {
						t.Fatalf("error = %q names timeouts.%s, want %s", msg, other, c.phase)
					}
				}
				if got := final.Text() != ""; got != c.text {
					t.Errorf("partial text kept = %v (%q), want %v", got, final.Text(), c.text)
				}
				if !llm.IsRetryable(*final, 0) {
					t.Errorf("the agent's auto-retry would not retry %q", msg)
				}
				retried := strings.Contains(logs.String(), "retrying")
				if retried != c.retry {
					t.Errorf("retried before the stream = %v, want %v; log: %s", retried, c.retry, logs.String())
				}
				if srv != nil {
					if n := len(srv.Requests()); n != 1 {
						t.Errorf("server got %d requests, want 1", n)
					}
				}
			})
		}
	}
}

// TestProviderTimeoutsDefault checks that a provider without timeouts
// gets the documented defaults.
func TestProviderTimeoutsDefault(t *testing.T) {
	d := DefaultTimeouts()
	if d.Connect != 30*time.Second || d.FirstByte != 10*time.Minute || d.Idle != 2*time.Minute {
		t.Fatalf("DefaultTimeouts = %+v", d)
	}
	if got := (Timeouts{Idle: time.Hour}).WithDefaults(); got.Idle != time.Hour || got.FirstByte != 10*time.Minute {
		t.Fatalf("WithDefaults kept/filled wrongly: %+v", got)
	}
}
