package transport

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

// TestUnreachableIsFinal: a base URL where nothing listens fails at once
// (no retry), with one message that names the URL, the config key and the
// system's error; the typed error, not the words, keeps the agent's retry
// off it.
func TestUnreachableIsFinal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	c := &Client{Provider: "local", BaseURL: base, Retry: RetryPolicy{MaxRetries: 5, Sleep: func(context.Context, time.Duration) error { return nil }}}
	attempts := 0
	err = c.Do(t.Context(), func(ctx context.Context) error {
		attempts++
		resp, err := http.Get(base + "/chat/completions")
		if err == nil {
			resp.Body.Close()
			t.Fatal("something listens on a closed port")
		}
		return c.Failure(nil, err)
	})
	if attempts != 1 {
		t.Errorf("%d attempts, want 1", attempts)
	}
	msg := err.Error()
	if !strings.Contains(msg, "is the server at "+base+" running?") || !strings.Contains(msg, "providers.local") ||
		!strings.Contains(msg, "connection refused") {
		t.Errorf("message %q", msg)
	}
	m := llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopError, ErrorMessage: msg}
	if llm.ShouldRetry(m, err, 0) {
		t.Errorf("the agent would retry %q", msg)
	}
}

func TestStatusHints(t *testing.T) {
	tests := []struct {
		status int
		want   string
	}{
		{401, "OPENAI_API_KEY is set but the provider rejects it"},
		{403, "OPENAI_API_KEY is set but the provider rejects it"},
		{404, "is the model id right"},
	}
	for _, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tt.status)
			w.Write([]byte(`{"error":{"message":"nope"}}`))
		}))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		c := &Client{Provider: "openai", BaseURL: srv.URL, KeySource: "OPENAI_API_KEY"}
		e := c.Failure(resp, nil)
		srv.Close()
		if !strings.Contains(e.Error(), tt.want) || e.Retryable() {
			t.Errorf("%d: %q (retryable %v)", tt.status, e.Error(), e.Retryable())
		}
		if llm.ShouldRetry(llm.Message{StopReason: llm.StopError, ErrorMessage: e.Error()}, e, 0) {
			t.Errorf("%d: the agent would retry %q", tt.status, e.Error())
		}
	}
}
