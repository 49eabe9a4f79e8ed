package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeDrainsTheGatewayBeforeHTTP: on SIGTERM serve stops the gateway
// first and the HTTP server after it, so while a run drains /readyz still
// answers, unready, and serve then exits 0. The run is a provider call
// that stalls until its idle timeout (2 s) ends it.
func TestServeDrainsTheGatewayBeforeHTTP(t *testing.T) {
	t.Parallel()
	dir, cfg, srv := stallingProvider(t, 3, "2s", "{enabled: false}")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	if code, body := s.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the signal: %d %q", code, body)
	}
	resp, err := http.Post(s.url+"/api/send", "application/json", strings.NewReader(`{"conv":"c1","id":"m1","text":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(20 * time.Second); len(srv.Requests()) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run never called the provider")
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The run holds the gateway for up to 2 s: HTTP must answer, unready.
	unready := false
	for deadline := time.Now().Add(10 * time.Second); !unready && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			break // the server is gone
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		unready = resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(body), "stopping")
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve after SIGTERM: %v; stderr:\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop; stderr:\n%s", s.stderr)
	}
	if !unready {
		t.Fatalf("/readyz never answered unready while the gateway drained; stderr:\n%s", s.stderr)
	}
}
