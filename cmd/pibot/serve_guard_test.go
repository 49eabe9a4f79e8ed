package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestServeRefusesWeakTokens: on a non-loopback listen a short web or
// metrics token is refused at start, naming the key and how to make a
// good one.
func TestServeRefusesWeakTokens(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "short.tok", "abc\n")
	tests := []struct {
		name, config, key string
	}{
		{"one-character web token", "http:\n  listen: 0.0.0.0:0\nadapters:\n  web:\n    token: x\n", "adapters.web.token"},
		{"short web token file", "http:\n  listen: 0.0.0.0:0\nadapters:\n  web:\n    token_file: short.tok\n", "adapters.web.token"},
		{"short metrics token", "http:\n  listen: 0.0.0.0:0\n  metrics_token: tiny\nadapters:\n  web:\n    token: 0123456789abcdef0123456789abcdef\n", "http.metrics_token"},
		{"web token of the old 16-character minimum", "http:\n  listen: 0.0.0.0:0\nadapters:\n  web:\n    token: 0123456789abcdef\n", "adapters.web.token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\n"+tt.config)
			r := pibot(t, dir, "", nil, "serve", "-c", cfg)
			if r.code != 1 || !strings.Contains(r.stderr, tt.key) || !strings.Contains(r.stderr, "openssl rand -hex 16") ||
				!strings.Contains(r.stderr, "at least 32") {
				t.Fatalf("exit %d, stderr %q; want exit 1 naming %s and how to generate a token", r.code, r.stderr, tt.key)
			}
		})
	}
	// On loopback a short token is the user's business.
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nadapters:\n  web:\n    token: x\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	if code := s.stop(t); code != 0 {
		t.Fatalf("loopback with a short token: exit %d; stderr:\n%s", code, s.stderr)
	}
}

func getWith(t *testing.T, url, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeMetricsNeedTokenOffLoopback: on a non-loopback listen /metrics
// is off without http.metrics_token and asks for it when set; the web
// chat's token does not open it.
func TestServeMetricsNeedTokenOffLoopback(t *testing.T) {
	const webTok, metricsTok = "web-0123456789abcdef0123456789abcdef", "metrics-0123456789abcdef0123456789abcdef"
	for _, tt := range []struct {
		name, extra string
		tries       map[string]int // bearer -> status
	}{
		{"no metrics token", "", map[string]int{"": 403, webTok: 403}},
		{"metrics token", "  metrics_token: " + metricsTok + "\n", map[string]int{"": 401, webTok: 401, "wrong-0123456789abcdef0123456789abcdef": 401, metricsTok: 200}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nhttp:\n  listen: 0.0.0.0:0\n"+tt.extra+"adapters:\n  web:\n    token: "+webTok+"\n")
			s := startServe(t, dir, "-c", cfg)
			url := strings.Replace(s.url, "0.0.0.0", "127.0.0.1", 1) + "/metrics"
			for bearer, want := range tt.tries {
				code, body := getWith(t, url, bearer)
				if code != want {
					t.Errorf("GET /metrics with bearer %q = %d %.100q, want %d", bearer, code, body, want)
				}
				if want == 200 && !strings.Contains(body, "go_goroutines") {
					t.Errorf("metrics body %.200q", body)
				}
				if want != 200 && strings.Contains(body, "go_goroutines") {
					t.Errorf("metrics leaked with bearer %q", bearer)
				}
			}
			if code, _ := getWith(t, strings.Replace(url, "/metrics", "/healthz", 1), ""); code != 200 {
				t.Errorf("/healthz = %d, want 200 without a token", code)
			}
			if code := s.stop(t); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
			}
		})
	}
}

// TestServeRefusesUnreachableRedis: a valid cluster.redis_url passes
// `config check`; serve with a Redis that does not answer stops with an
// error naming the key and never the password.
func TestServeRefusesUnreachableRedis(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\ncluster:\n  redis_url: redis://:hunter2-secret@"+addr+"/2\n"+testClusterSecret)
	if r := pibot(t, dir, "", nil, "config", "check", "-c", cfg); r.code != 0 {
		t.Fatalf("config check of a valid redis_url: exit %d, stderr %q", r.code, r.stderr)
	}
	r := pibot(t, dir, "", nil, "serve", "-c", cfg, "--listen", "127.0.0.1:0")
	if r.code == 0 || !strings.Contains(r.stderr, "cluster.redis_url") || strings.Contains(r.stderr+r.stdout, "hunter2") {
		t.Fatalf("serve with redis_url: exit %d, stderr %q; want a refusal naming cluster.redis_url without the password", r.code, r.stderr)
	}
}
