package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/web"
)

// server is a running `pibot serve`.
type server struct {
	cmd    *exec.Cmd
	url    string
	stderr *logBuffer
	done   chan error
}

// logBuffer is a process's stderr as it writes it: read (a failing
// test's message) while the process still writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServe starts `pibot serve args...` in dir and waits for its ready
// line.
func startServe(t *testing.T, dir string, args ...string) *server {
	t.Helper()
	return startServeEnv(t, dir, nil, args...)
}

// startServeEnv is startServe with env ("K=V") added to the environment.
func startServeEnv(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, stderr: &logBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "pibot ready on ")
		if !ok {
			t.Fatalf("first line %q, stderr:\n%s", line, s.stderr)
		}
		s.url = url
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not get ready; stderr:\n%s", s.stderr)
	}
	return s
}

func (s *server) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// stop sends SIGTERM and returns the exit code.
func (s *server) stop(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop; stderr:\n%s", s.stderr)
		return -1
	}
}

func TestServeWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	s := startServe(t, dir, "--listen", "127.0.0.1:0")
	for _, tt := range []struct {
		path, want string
	}{
		{"/healthz", "ok"},
		{"/readyz", "ok"},
		{"/metrics", "pibot_runs_total"},
		{"/metrics", "go_goroutines"},
		{"/", "<html"},
	} {
		code, body := s.get(t, tt.path)
		if code != http.StatusOK || !strings.Contains(strings.ToLower(body), strings.ToLower(tt.want)) {
			t.Errorf("GET %s = %d %.200q, want 200 containing %q", tt.path, code, body, tt.want)
		}
	}
	if _, err := os.Stat(dir + "/pibot-data/.pibot.lock"); err != nil {
		t.Errorf("default data dir not used: %v", err)
	}

	second := pibot(t, dir, "", nil, "serve", "--listen", "127.0.0.1:0")
	if second.code != 1 || !strings.Contains(second.stderr, "in use by another pibot") {
		t.Errorf("second instance: exit %d, stderr %q", second.code, second.stderr)
	}

	if code := s.stop(t); code != 0 {
		t.Fatalf("exit after SIGTERM = %d; stderr:\n%s", code, s.stderr)
	}
}

func TestServeRefusesUnsafeConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, config, want string
	}{
		{"web without token off loopback", "http:\n  listen: 0.0.0.0:0\n", "adapters.web.token"},
		{"bad key", "http:\n  lisen: x\n", "http.lisen"},
		{"bad value", "agent:\n  queue: {mode: shout}\n", "agent.queue.mode"},
		{"telegram token", "adapters:\n  telegram:\n    token: nocolon\n", "adapters.telegram.token"},
		{"slack socket mode without app token", "adapters:\n  slack:\n    bot_token: xoxb-1\n", "adapters.slack.app_token"},
		{"slack bot token", "adapters:\n  slack:\n    bot_token: nope\n    app_token: xapp-1\n", "adapters.slack.bot_token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\n"+tt.config)
			r := pibot(t, dir, "", nil, "serve", "-c", cfg)
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit 1 naming %s", r.code, r.stderr, tt.want)
			}
		})
	}
}

func TestServeWebChatRunsTheAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	resp, err := http.Post(s.url+"/api/send", "application/json", strings.NewReader(`{"conv":"c1","id":"m1","text":"hello web"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/send = %d", resp.StatusCode)
	}
	var ctx string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(dir, "data", "sessions", "*", "*", "*.jsonl"))
		more, _ := filepath.Glob(filepath.Join(dir, "data", "sessions", "*", "*.jsonl"))
		files = append(files, more...)
		if len(files) == 1 {
			if ctx = readFile(t, files[0]); strings.Contains(ctx, "You said: hello web") {
				break
			}
		}
	}
	if !strings.Contains(ctx, "You said: hello web") {
		t.Fatalf("no answer in the session; file %q\nstderr:\n%s", ctx, s.stderr)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit after SIGTERM = %d; stderr:\n%s", code, s.stderr)
	}
}

// The local users' access keys read "platform:user" once, as /whoami
// shows them and access.owners takes them (not "web:web:local").
func TestLocalOwnerKeys(t *testing.T) {
	if got, want := localOwners(), []string{"web:local", "term:local"}; !slices.Equal(got, want) {
		t.Fatalf("local owners = %q, want %q", got, want)
	}
}

// TestDocsTokenMinimum: every document, example and deploy file that
// states the token minimum states web.MinTokenLen, and every `openssl
// rand -hex N` it suggests prints at least that many characters.
func TestDocsTokenMinimum(t *testing.T) {
	t.Parallel()
	files := []string{"README.md", "SECURITY.md", "config.example.yaml", "config/config.example.yaml",
		"deploy/pibot.env.example", "deploy/docker/config.yaml", "deploy/systemd/config.yaml", "deploy/systemd/pibot.service",
		"deploy/docker-compose.yml", "deploy/docker-compose.cluster.yml"}
	docs, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	minimum := regexp.MustCompile(`(?:at least\s+(\d+)|(\d+)\+)\s+(?:#\s*)?characters`)
	hex := regexp.MustCompile(`rand -hex (\d+)`)
	stated := 0
	for _, f := range append(files, docs...) {
		if !filepath.IsAbs(f) && !strings.HasPrefix(f, "..") {
			f = filepath.Join("..", "..", f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range minimum.FindAllStringSubmatch(string(b), -1) {
			stated++
			if n, _ := strconv.Atoi(m[1] + m[2]); n != web.MinTokenLen {
				t.Errorf("%s: %q: the minimum is %d", f, m[0], web.MinTokenLen)
			}
		}
		for _, m := range hex.FindAllStringSubmatch(string(b), -1) {
			if n, _ := strconv.Atoi(m[1]); 2*n < web.MinTokenLen {
				t.Errorf("%s: %q prints %d characters, fewer than %d", f, m[0], 2*n, web.MinTokenLen)
			}
		}
	}
	if stated < 6 {
		t.Errorf("the minimum is stated %d times; the patterns no longer find the statements", stated)
	}
}

// The web chat's empty conversation says what to configure when no model
// can answer (/api/info's notice), and nothing of the kind when one can.
func TestServeWebNoModelNotice(t *testing.T) {
	for _, tt := range []struct {
		name, config string
		want         bool
	}{{"no model", "data_dir: ./d\n", true}, {"faux model", fauxConfig, false}} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", tt.config)
			s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
			code, body := s.get(t, "/api/info")
			if code != http.StatusOK || strings.Contains(body, "No model is configured") != tt.want ||
				tt.want && !strings.Contains(body, "OPENAI_API_KEY") {
				t.Errorf("/api/info = %d %q", code, body)
			}
			s.stop(t)
		})
	}
}
