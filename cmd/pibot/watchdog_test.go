package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeWatchdogStopsAStuckRun runs a model that goes silent through
// the real binary: agent.max_idle stops the run, the chat is told why, the
// stop is counted in /metrics and logged.
func TestServeWatchdogStopsAStuckRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", `data_dir: ./data
providers:
  f:
    api: faux
    models: [{id: m}]
    script: [{text: "a very slow answer", delay: 1m}]
agent:
  model: f/m
  max_idle: 1s
  approvals: {timeout: 500ms}
`)
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/events?conv=c1", nil)
	if err != nil {
		t.Fatal(err)
	}
	events, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	resp, err := http.Post(s.url+"/api/send", "application/json", strings.NewReader(`{"conv":"c1","id":"m1","text":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/send = %d", resp.StatusCode)
	}
	told := false
	for sc := bufio.NewScanner(events.Body); sc.Scan(); {
		if strings.Contains(sc.Text(), "Stopped: nothing came from the model or a tool for 1s (agent.max_idle).") {
			told = true
			break
		}
	}
	if !told {
		t.Fatalf("the chat was not told that the run was stopped; stderr:\n%s", s.stderr)
	}
	if _, body := s.get(t, "/metrics"); !strings.Contains(body, `pibot_runs_stopped_total{limit="max_idle"} 1`) ||
		!strings.Contains(body, `pibot_runs_stopped_total{limit="max_run"} 0`) {
		t.Errorf("/metrics does not count the stop:\n%s", grepLines(body, "pibot_runs_stopped"))
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit after SIGTERM = %d; stderr:\n%s", code, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "run stopped by its watchdog") {
		t.Errorf("the stop is not logged; stderr:\n%s", s.stderr)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
