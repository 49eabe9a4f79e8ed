package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/providers/providertest"
)

// TestChatProviderStallShowsHint replays a provider that streams the start
// of an answer and then stops sending, through the real binary: `pibot
// chat -p` must end (not hang) and tell the user which timeout fired and
// what to raise.
func TestChatProviderStallShowsHint(t *testing.T) {
	t.Parallel()
	dir, cfg, srv := stallingProvider(t, 3, "300ms", "{enabled: false}")
	r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", "hello")
	out := r.stdout + r.stderr
	if !strings.Contains(out, "stopped sending for 300ms") || !strings.Contains(out, "raise providers.slow.timeouts.idle if this model thinks for long") {
		t.Fatalf("exit %d, output does not give the idle timeout and its hint:\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("provider got %d requests, want 1", n)
	}
}

// TestServeProviderStallReply replays issue 30.11 through `pibot serve`
// and its web chat: a provider (a scripted SSE server) streams the start
// of an answer and stops sending, on every attempt. The reply showed one
// copy of the partial answer per attempt and no reason; now it shows the
// partial answer once, then why it stopped and how often it was retried,
// and the provider was called once more than that.
func TestServeProviderStallReply(t *testing.T) {
	t.Parallel()
	dir, cfg, srv := stallingProvider(t, 4, "300ms", "{enabled: true, max_retries: 3, base_delay: 10ms}") // "Hello! How can I"
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	resp, err := http.Post(s.url+"/api/send", "application/json", strings.NewReader(`{"conv":"c1","id":"m1","text":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var reply []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		reply = webReply(t, s.url, "c1")
		if strings.Contains(strings.Join(reply, "\n"), "retried") {
			break
		}
	}
	all := strings.Join(reply, "\n---\n")
	if n := strings.Count(all, "Hello! How can I"); n != 1 {
		t.Errorf("the partial answer shows %d times in the reply, want once:\n%s", n, all)
	}
	for _, want := range []string{"stopped sending for 300ms", "providers.slow.timeouts.idle", "retried once"} {
		if !strings.Contains(all, want) {
			t.Errorf("the reply lacks %q:\n%s", want, all)
		}
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("provider got %d requests, want 2 (a stalled call is retried once)", n)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit after SIGTERM = %d; stderr:\n%s", code, s.stderr)
	}
}

// webReply returns the bot's messages in web conversation conv as the
// page shows them: each message's last text.
func webReply(t *testing.T, base, conv string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events?conv="+conv, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var order []string
	texts := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Type, ID, From, Text string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if ev.Type == "ready" {
			break
		}
		if ev.Type != "msg" || ev.From == "user" {
			continue
		}
		if _, seen := texts[ev.ID]; !seen {
			order = append(order, ev.ID)
		}
		texts[ev.ID] = ev.Text
	}
	out := make([]string, len(order))
	for i, id := range order {
		out[i] = texts[id]
	}
	return out
}

// stallingProvider starts a provider that streams the first events of a
// recorded answer (events SSE events) and then stops sending, and writes
// a config in a new directory whose model "slow/m" it serves with the idle
// timeout idle and the agent's retry block retry. It returns the
// directory, the config's path and the provider.
func stallingProvider(t *testing.T, events int, idle, retry string) (dir, cfg string, srv *providertest.Server) {
	t.Helper()
	b, err := os.ReadFile("../../providers/openai/testdata/cc_text.sse")
	if err != nil {
		t.Fatal(err)
	}
	head := strings.Join(strings.SplitAfter(string(b), "\n\n")[:events], "")
	srv = providertest.NewServer(t, providertest.Response{Body: head, Stall: true})
	dir = t.TempDir()
	cfg = writeFile(t, dir, "c.yaml", "data_dir: ./data\nproviders:\n  slow:\n    api: openai-completions\n    base_url: "+srv.URL+"/v1\n"+
		"    models: [{id: m}]\n    timeouts: {idle: "+idle+"}\nagent:\n  model: slow/m\n  retry: "+retry+"\n")
	return dir, cfg, srv
}
