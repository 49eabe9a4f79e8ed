package llm_test

import (
	"testing"

	"github.com/pibot/pibot/llm"
)

// TestRetryableIgnoresURLs replays a flaky failure: a 404 whose hint named
// a base URL on port 35045 read as retryable ("504" in the port).
func TestRetryableIgnoresURLs(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"openai: 404 nope (does http://127.0.0.1:35045 serve this API?)", false},
		{"is the server at https://llm.example:5029/v1 running?", false},
		{"503 Service Unavailable from http://127.0.0.1:8080", true},
		{"overloaded_error", true},
	} {
		m := llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopError, ErrorMessage: tc.msg}
		if got := llm.IsRetryable(m, 0); got != tc.want {
			t.Errorf("IsRetryable(%q) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}
