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
