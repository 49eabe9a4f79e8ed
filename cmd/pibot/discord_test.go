package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
)

const discordTestToken = "MTA5ODc2NTQzMjEwOTg3NjU0.GxYzAb.cmd-test-secret-token"

func TestDiscordInvite(t *testing.T) {
	dir := t.TempDir()
	out := ok(t, dir, "discord", "invite", "--application-id", "123456789012345678")
	if !strings.Contains(out, "client_id=123456789012345678") || !strings.Contains(out, "scope=bot+applications.commands") {
		t.Errorf("invite URL %q", out)
	}
	srv := discordtest.New(discordTestToken)
	t.Cleanup(srv.Close)
	cfg := writeFile(t, dir, "c.yaml", "adapters:\n  discord:\n    token: "+discordTestToken+"\n    api_url: "+srv.URL+"\n")
	out = ok(t, dir, "discord", "invite", "-c", cfg)
	if !strings.Contains(out, "client_id="+srv.Bot.ID) {
		t.Errorf("invite URL with the id asked from Discord: %q", out)
	}
	if r := pibot(t, dir, "", nil, "discord", "invite"); r.code != 1 || !strings.Contains(r.stderr, "adapters.discord.application_id") {
		t.Errorf("without an id: exit %d, %q", r.code, r.stderr)
	}
}

// With a token Discord refuses, pibot stays up: /healthz answers, /readyz
// fails naming Discord, the adapter stops after a handful of calls with one
// clear log line, and the token never appears, even at debug level.
func TestServeDiscordRefusedToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv := discordtest.New("the-right-token")
	t.Cleanup(srv.Close)
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nlog:\n  level: debug\nadapters:\n  web:\n    enabled: false\n  discord:\n    token: "+
		discordTestToken+"\n    api_url: "+srv.URL+"\n    guilds: [\"800000000000000001\"]\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	if code, body := s.get(t, "/healthz"); code != http.StatusOK || !strings.Contains(body, "ok") {
		t.Errorf("/healthz = %d %q", code, body)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := s.get(t, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "discord") && strings.Contains(body, "invalid token") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q; stderr:\n%s", code, body, s.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if n, ids := len(srv.Calls()), srv.Identifies(); n > 20 || ids > 5 {
		t.Errorf("%d REST calls and %d identifies with a refused token", n, ids)
	}
	code, _ := s.get(t, "/healthz")
	if code != http.StatusOK {
		t.Errorf("pibot is not up: /healthz = %d", code)
	}
	s.stop(t)
	logs := s.stderr.String()
	if strings.Contains(logs, discordTestToken) || strings.Contains(logs, "cmd-test-secret-token") {
		t.Errorf("the token is in the output:\n%s", logs)
	}
	if n := strings.Count(logs, "adapter stopped; pibot and its other adapters keep running"); n != 1 {
		t.Errorf("%d stop lines in:\n%s", n, logs)
	}
}
