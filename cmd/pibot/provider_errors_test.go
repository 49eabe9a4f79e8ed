package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// providerConfig is a configuration whose one model is served at base.
func providerConfig(base string) string {
	return fmt.Sprintf("data_dir: ./data\nproviders:\n  local:\n    api: openai-completions\n    base_url: %s\n    api_key: sk-test\n    models: [{id: m}]\n"+
		"agent:\n  model: local/m\n  retry: {enabled: true, max_retries: 2, base_delay: 1ms}\n", base)
}

// TestOneRetryPolicy replays the wrong base URL that took 12 attempts: a
// failing call is retried by the agent's policy alone (max_retries 2: three
// calls), and errors that repeating cannot fix (a rejected key, an unknown
// model, nothing listening) fail at the first call with a hint.
func TestOneRetryPolicy(t *testing.T) {
	var calls atomic.Int32
	status := atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		fmt.Fprint(w, `{"error":{"message":"no luck"}}`)
	}))
	defer srv.Close()
	tests := []struct {
		status int
		calls  int32
		want   string
	}{
		{500, 3, "no luck"},
		{401, 1, "providers.local.api_key is set but the provider rejects it"},
		{404, 1, "is the model id right"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		cfg := writeFile(t, dir, "c.yaml", providerConfig(srv.URL+"/v1"))
		calls.Store(0)
		status.Store(int32(tt.status))
		r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", "hi")
		if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%d: exit %d, stderr %q", tt.status, r.code, r.stderr)
		}
		if n := calls.Load(); n != tt.calls {
			t.Errorf("%d: %d calls, want %d", tt.status, n, tt.calls)
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", providerConfig(closed))
	r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "is the server at "+closed+" running?") || strings.Contains(r.stderr, "retrying") {
		t.Errorf("nothing listening: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestContextOverflowSaysWhy: the first message of a conversation that
// does not fit the model's window, answered by each API's real
// context-length error (HTTP 400 with the provider's body), used to end
// with "compaction: compact: Nothing to compact (session too small)". The
// user sees the provider's error and what to do about it (which key), and
// pibot exits 1 after one call: compaction has nothing to summarize.
func TestContextOverflowSaysWhy(t *testing.T) {
	for _, tc := range []struct{ api, path, body, says string }{
		{"openai-completions", "/v1/chat/completions",
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"maximum context length is 128000 tokens"},
		{"openai-responses", "/v1/responses",
			`{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`,
			"exceeds the context window of this model"},
		{"anthropic-messages", "/v1/messages",
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215341 tokens > 200000 maximum"},"request_id":"req_011CUZ"}`,
			"prompt is too long: 215341 tokens > 200000 maximum"},
	} {
		t.Run(tc.api, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				if r.URL.Path != tc.path {
					t.Errorf("request to %s, want %s", r.URL.Path, tc.path)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			base := srv.URL + "/v1"
			if tc.api == "anthropic-messages" {
				base = srv.URL
			}
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", fmt.Sprintf("data_dir: ./data\nproviders:\n  big:\n    api: %s\n    base_url: %s\n    api_key: sk-test\n    models: [{id: m, context_window: 200000}]\n"+
				"agent:\n  model: big/m\n  retry: {enabled: true, max_retries: 2, base_delay: 1ms}\n", tc.api, base))
			r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", strings.Repeat("a very long paste ", 50))
			if r.code != 1 || !strings.Contains(r.stderr, tc.says) || !strings.Contains(r.stderr, "does not fit the model's context window") ||
				!strings.Contains(r.stderr, "providers.big.models[].context_window") || strings.Contains(r.stderr, "Nothing to compact") {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d calls, want 1 (the error is not retried, and there is nothing to summarize)", n)
			}
		})
	}
}

// TestSilentOverflowKeepsTheAnswer: an answer whose usage exceeds the
// model's window (the faux model counts a token per 4 characters, here
// against a 40-token window) is a silent overflow. pi compacts and
// continues, and ignores that there is nothing to continue from (the
// answer is the last message); pibot used to exit 1 with "continue after
// compaction: cannot continue from message role: assistant", or "Nothing
// to compact" when compaction keeps everything, although the answer was
// given. Now the answer is printed and pibot exits 0 either way.
func TestSilentOverflowKeepsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, compaction string
		compacted        bool
	}{
		{"nothing to compact", "{enabled: true}", false},
		{"compacted", "{enabled: true, reserve_tokens: 10, keep_recent_tokens: 20}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", "data_dir: ./data\nproviders:\n  f:\n    api: faux\n    models: [{id: m, context_window: 40}]\n"+
				"agent:\n  model: f/m\n  compaction: "+tc.compaction+"\n")
			r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", "the first question, long enough to overflow a tiny window")
			if r.code != 0 || !strings.Contains(r.stdout, "You said: the first question") {
				t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			if got := strings.Contains(readFile(t, sessionFiles(t, dir)[0]), `"type":"compaction"`); got != tc.compacted {
				t.Fatalf("compacted %v, want %v", got, tc.compacted)
			}
		})
	}
}
