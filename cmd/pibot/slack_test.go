package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pibot/pibot/adapters/slack/slacktest"
)

// `pibot slack manifest` prints a manifest with the scopes, events, slash
// command and Socket Mode setting the configuration needs, as YAML or JSON.
func TestSlackManifest(t *testing.T) {
	dir := t.TempDir()
	var m struct {
		Features struct {
			SlashCommands []struct {
				Command string `json:"command" yaml:"command"`
				URL     string `json:"url" yaml:"url"`
			} `json:"slash_commands" yaml:"slash_commands"`
		} `json:"features" yaml:"features"`
		OAuthConfig struct {
			Scopes struct {
				Bot []string `json:"bot" yaml:"bot"`
			} `json:"scopes" yaml:"scopes"`
		} `json:"oauth_config" yaml:"oauth_config"`
		Settings struct {
			EventSubscriptions struct {
				RequestURL string   `json:"request_url" yaml:"request_url"`
				BotEvents  []string `json:"bot_events" yaml:"bot_events"`
			} `json:"event_subscriptions" yaml:"event_subscriptions"`
			SocketModeEnabled bool `json:"socket_mode_enabled" yaml:"socket_mode_enabled"`
		} `json:"settings" yaml:"settings"`
	}
	out := ok(t, dir, "slack", "manifest")
	if err := yaml.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("yaml: %v\n%s", err, out)
	}
	if !m.Settings.SocketModeEnabled || m.Settings.EventSubscriptions.RequestURL != "" {
		t.Errorf("socket mode settings: %+v", m.Settings)
	}
	for _, s := range []string{"chat:write", "commands", "im:history", "app_mentions:read", "files:read", "files:write", "assistant:write"} {
		if !slices.Contains(m.OAuthConfig.Scopes.Bot, s) {
			t.Errorf("scope %s missing: %v", s, m.OAuthConfig.Scopes.Bot)
		}
	}
	if !slices.Contains(m.Settings.EventSubscriptions.BotEvents, "message.im") || len(m.Features.SlashCommands) != 1 || m.Features.SlashCommands[0].Command != "/pi" {
		t.Errorf("events or command: %+v %+v", m.Settings.EventSubscriptions, m.Features)
	}

	cfg := writeFile(t, dir, "c.yaml", "http:\n  listen: 127.0.0.1:8080\nadapters:\n  slack:\n    bot_token: xoxb-1\n    signing_secret: s\n    mode: http\n    command: /ask\n")
	if r := pibot(t, dir, "", nil, "slack", "manifest", "-c", cfg); r.code == 0 || !strings.Contains(r.stderr, "--url") {
		t.Errorf("http mode without --url: exit %d %q", r.code, r.stderr)
	}
	out = ok(t, dir, "slack", "manifest", "-c", cfg, "--url", "https://pibot.example.com/", "--format", "json")
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	const u = "https://pibot.example.com/slack/events"
	if m.Settings.SocketModeEnabled || m.Settings.EventSubscriptions.RequestURL != u || m.Features.SlashCommands[0].URL != u || m.Features.SlashCommands[0].Command != "/ask" {
		t.Errorf("http mode: %+v %+v", m.Settings, m.Features)
	}
	if r := pibot(t, dir, "", nil, "slack", "manifest", "--format", "xml"); r.code != 2 {
		t.Errorf("--format xml: exit %d", r.code)
	}
}

// `pibot serve` with adapters.slack runs the agent for a DM, in socket
// mode and in http mode (POST /slack/events on http.listen).
func TestServeSlack(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"socket", "http"} {
		t.Run(mode, func(t *testing.T) {
			srv := slacktest.New()
			defer srv.Close()
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", fauxConfig+"access:\n  owners: [\"slack:UOWNER\"]\nadapters:\n  web:\n    enabled: false\n  slack:\n"+
				"    bot_token: "+srv.BotToken+"\n    app_token: "+srv.AppToken+"\n    signing_secret: "+srv.SigningSecret+"\n"+
				"    mode: "+mode+"\n    api_url: "+srv.APIURL+"\n")
			s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
			_, bodies := srv.Post(slacktest.Say{Channel: "D100", User: "UOWNER", Text: "hello slack"})
			if mode == "socket" {
				if err := srv.WaitConnected(1, 15*time.Second); err != nil {
					t.Fatal(err)
				}
				if err := srv.WaitAck(srv.Deliver("events_api", bodies[0]), 15*time.Second); err != nil {
					t.Fatal(err)
				}
			} else {
				resp, err := http.DefaultClient.Do(srv.Request(s.url+"/slack/events", bodies[0], 0))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("POST /slack/events = %d; stderr:\n%s", resp.StatusCode, s.stderr)
				}
			}
			deadline := time.Now().Add(15 * time.Second)
			for !answered(srv) {
				if time.Now().After(deadline) {
					t.Fatalf("no answer in Slack; calls %+v\nstderr:\n%s", srv.Calls(), s.stderr)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if code := s.stop(t); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
			}
			for _, secretValue := range []string{srv.BotToken, srv.AppToken, srv.SigningSecret} {
				if strings.Contains(s.stderr.String(), secretValue) {
					t.Errorf("the log holds a secret")
				}
			}
		})
	}
}

func answered(srv *slacktest.Server) bool {
	for _, m := range srv.Messages("D100") {
		if m.User == srv.BotUserID && strings.Contains(m.Text, "You said: hello slack") {
			return true
		}
	}
	return false
}

// A refused Slack bot token fails /readyz with the adapter's reason, as
// Telegram's and Discord's do, while pibot keeps serving (/healthz).
func TestServeSlackRefusedToken(t *testing.T) {
	dir := t.TempDir()
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	srv.Fail("auth.test", 1000, slacktest.Fault{Kind: slacktest.FaultError, Error: "invalid_auth"})
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nadapters:\n  web:\n    enabled: false\n  slack:\n    bot_token: "+srv.BotToken+
		"\n    app_token: "+srv.AppToken+"\n    api_url: "+srv.APIURL+"\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := s.get(t, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "slack") && strings.Contains(body, "adapters.slack.bot_token") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q; stderr:\n%s", code, body, s.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Errorf("pibot is not up: /healthz = %d", code)
	}
	s.stop(t)
	if logs := s.stderr.String(); strings.Contains(logs, srv.BotToken) {
		t.Errorf("the token is in the output:\n%s", logs)
	}
}
