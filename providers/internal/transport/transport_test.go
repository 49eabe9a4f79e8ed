package transport

import (
	"net/http"
	"testing"
	"time"
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
