package llm_test

import (
	"errors"
	"fmt"
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

// TestShouldRetry: the error a call failed with in this process decides
// whatever its text says; without one, pi's pattern reads the message, as
// it does for a message read back from a session file.
func TestShouldRetry(t *testing.T) {
	wrapped := func(e error) error { return fmt.Errorf("openai: open stream: %w", e) }
	for _, tc := range []struct {
		name string
		msg  string
		err  error
		want bool
	}{
		{"typed 503 whose text the pattern misses", "something odd happened", &llm.APIError{Provider: "p", Status: 503, Message: "odd"}, true},
		{"typed 429", "slow down", &llm.APIError{Status: 429}, true},
		{"typed transport failure", "dial: bad luck", &llm.APIError{Message: "bad luck"}, true},
		{"typed wrapped 502", "quiet", wrapped(&llm.APIError{Status: 502}), true},
		{"typed 400 whose text the pattern matches", "400 upstream timeout 503", &llm.APIError{Status: 400, Message: "upstream timeout 503"}, false},
		{"typed 404 naming a port with 500", "404 (does http://127.0.0.1:5004 serve this API?)", &llm.APIError{Status: 404}, false},
		{"typed permanent connection refused", "connection refused: nothing is listening", &llm.APIError{Message: "connection refused", Permanent: true}, false},
		{"typed overflow", "overloaded? no: prompt is too long", wrapped(llm.ErrContextOverflow), false},
		{"typed 500 with overflow text", "500 prompt is too long", &llm.APIError{Status: 500}, false},
		{"untyped error falls back to the pattern", "overloaded_error", errors.New("no decision here"), true},
		{"session file: retryable text", "503 Service Unavailable", nil, true},
		{"session file: rate limit", "Rate limit reached", nil, true},
		{"session file: plain failure", "invalid api key", nil, false},
		{"session file: overflow", "prompt is too long: 300000 tokens", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopError, ErrorMessage: tc.msg}
			if got := llm.ShouldRetry(m, tc.err, 0); got != tc.want {
				t.Errorf("ShouldRetry(%q, %v) = %v, want %v", tc.msg, tc.err, got, tc.want)
			}
		})
	}
	// Only a failed call is retried, whatever error is attached.
	for _, stop := range []llm.StopReason{llm.StopStop, llm.StopAborted, llm.StopLength} {
		m := llm.Message{Role: llm.RoleAssistant, StopReason: stop, ErrorMessage: "503"}
		if llm.ShouldRetry(m, &llm.APIError{Status: 503}, 0) {
			t.Errorf("stop %s retried", stop)
		}
	}
}
