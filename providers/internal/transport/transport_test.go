package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		h    map[string]string
		want time.Duration
	}{
		{nil, 0},
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(10 * time.Second).Format(http.TimeFormat)}, 10 * time.Second},
		{map[string]string{"Retry-After": "soon"}, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestDelay(t *testing.T) {
	p := RetryPolicy{BaseDelay: time.Second, MaxDelay: 5 * time.Second}
	tests := []struct {
		attempt int
		after   time.Duration
		want    time.Duration
	}{
		{1, 0, time.Second}, {2, 0, 2 * time.Second}, {3, 0, 4 * time.Second}, {4, 0, 5 * time.Second},
		{1, 3 * time.Second, 3 * time.Second}, {1, time.Hour, 5 * time.Second},
	}
	for _, tt := range tests {
		if got := p.Delay(tt.attempt, tt.after); got != tt.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tt.attempt, tt.after, got, tt.want)
		}
	}
	if (RetryPolicy{MaxRetries: -1}).retries() != 0 || (RetryPolicy{}).retries() != 3 {
		t.Error("retries defaults")
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"message":"bad","type":"invalid_request_error"}}`, "invalid_request_error: bad"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error: Overloaded"},
		{`{"error":"model not found"}`, "model not found"},
		{`{"message":"nope"}`, "nope"},
		{` plain text `, "plain text"},
	}
	for _, tt := range tests {
		if got := ErrorText([]byte(tt.body)); got != tt.want {
			t.Errorf("ErrorText(%s) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func TestFailure(t *testing.T) {
	c := &Client{Provider: "p", Secrets: []secret.Secret{secret.New("sk-SECRET")}}
	tests := []struct {
		name   string
		resp   *http.Response
		err    error
		status int
		msg    string
		retry  bool
	}{
		{"status with body", &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"2"}},
			Body: io.NopCloser(strings.NewReader(`{"error":{"message":"slow down"}}`))}, errors.New("sdk"), 429, "slow down", true},
		{"status without body", &http.Response{StatusCode: 503, Header: http.Header{}, Body: http.NoBody}, errors.New("sdk"), 503, "status code (no body)", true},
		{"auth", &http.Response{StatusCode: 401, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(`{"error":{"message":"bad key sk-SECRET"}}`))}, errors.New("sdk"), 401, "bad key ", false},
		{"connection", nil, errors.New(`Post "http://x/sk-SECRET": dial tcp: connection refused`), 0, "connection error", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := c.Failure(tt.resp, tt.err)
			if e.Status != tt.status || !strings.Contains(e.Message, tt.msg) || e.Retryable() != tt.retry {
				t.Errorf("Failure = %+v (retryable %v)", e, e.Retryable())
			}
			if strings.Contains(e.Message, "sk-SECRET") || strings.Contains(e.Error(), "sk-SECRET") {
				t.Errorf("key leaked: %q", e.Error())
			}
		})
	}
}

func TestDoRetries(t *testing.T) {
	var slept []time.Duration
	c := &Client{Provider: "p", Retry: RetryPolicy{MaxRetries: 2, Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}}}
	calls := 0
	err := c.Do(t.Context(), func(context.Context) error {
		calls++
		return &llm.APIError{Status: 500, Message: "boom"}
	})
	if calls != 3 || len(slept) != 2 || err == nil {
		t.Errorf("calls %d sleeps %v err %v", calls, slept, err)
	}
	calls = 0
	plain := errors.New("encode")
	if err := c.Do(t.Context(), func(context.Context) error { calls++; return plain }); !errors.Is(err, plain) || calls != 1 {
		t.Errorf("non-API error retried: calls %d err %v", calls, err)
	}
	calls = 0
	if err := c.Do(t.Context(), func(context.Context) error { calls++; return nil }); err != nil || calls != 1 {
		t.Errorf("success: calls %d err %v", calls, err)
	}
}
