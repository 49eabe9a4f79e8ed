package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord"
	"github.com/pibot/pibot/adapters/slack"
	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/adapters/term"
	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/config"
)

// TestConfigCheckRefusesWhatServeRefuses (issue 30.6): `pibot config
// check` said ok to configurations `pibot serve` refused at start, and to
// others that did something else than they said. Over a table of
// configurations, each refused at start for what the file or the file
// system says, both commands now exit 1 with the same error lines, and
// the lines name the key.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	t.Parallel()
	const base = "data_dir: ./d\nhttp: {listen: '127.0.0.1:0'}\n"
	const ws = "agent: {workspace: ./ws}\n"
	good := strings.Repeat("0123456789abcdef", 2) // 32 characters
	tests := []struct {
		name, config, key string
		setup             func(t *testing.T, dir string)
	}{
		// What serve refused and config check let pass.
		{name: "short web token off loopback", key: "adapters.web.token",
			config: "data_dir: ./d\n" + ws + "http: {listen: '0.0.0.0:0'}\nadapters: {web: {token: 0123456789abcdef}}\n"},
		{name: "short metrics token off loopback", key: "http.metrics_token",
			config: "data_dir: ./d\n" + ws + "http: {listen: '0.0.0.0:0', metrics_token: tiny}\nadapters: {web: {token: " + good + "}}\n"},
		{name: "workspace containing the data dir", key: "agent.workspace",
			config: "data_dir: ./ws/d\nhttp: {listen: '127.0.0.1:0'}\n" + ws},
		{name: "workspace .", key: "agent.workspace", config: base + "agent: {workspace: .}\n"},
		{name: "data_dir that is a file", key: "data_dir", config: "data_dir: ./afile\nhttp: {listen: '127.0.0.1:0'}\n" + ws,
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "afile", "x") }},
		{name: "data_dir under a file", key: "data_dir", config: "data_dir: ./afile/d\nhttp: {listen: '127.0.0.1:0'}\n" + ws,
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "afile", "x") }},
		{name: "missing workspace", key: "agent.workspace", config: base + "agent: {workspace: ./nope}\n"},
		{name: "cluster webhook without a secret", key: "adapters.telegram.webhook_secret",
			config: base + ws + "cluster: {redis_url: 'redis://127.0.0.1:1/0', secret: '" + good + "'}\nadapters: {telegram: {token: '1:a', mode: webhook, webhook_url: 'https://bot.example/tg'}}\n"},
		{name: "6-field cron", key: "schedules[0].cron",
			config: base + ws + "schedules: [{name: s, cron: '0 0 9 * * *', location: 'web::c1', from: local, prompt: hi}]\n"},
		{name: "empty listen", key: "http.listen", config: "data_dir: ./d\n" + ws + "http: {listen: ''}\n"},
		{name: "missing token file", key: "adapters.web.token_file", config: base + ws + "adapters: {web: {token_file: ./none}}\n"},
		{name: "telegram token of the wrong shape", key: "adapters.telegram.token", config: base + ws + "adapters: {telegram: {token: nocolon}}\n"},
		{name: "telegram api_url", key: "adapters.telegram.api_url", config: base + ws + "adapters: {telegram: {token: '1:a', api_url: 'not a url'}}\n"},
		{name: "slack bot token of the wrong shape", key: "adapters.slack.bot_token", config: base + ws + "adapters: {slack: {bot_token: nope, app_token: xapp-1}}\n"},
		{name: "skills folder inside the workspace", key: "agent.skills[0]", config: base + "agent: {workspace: ./ws, skills: [./ws/.pi/skills]}\n",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(filepath.Join(dir, "ws/.pi/skills"), 0o755); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "missing prompts folder", key: "agent.prompts[0]", config: base + "agent: {workspace: ./ws, prompts: [./nope]}\n"},
		{name: "missing hook program", key: "hooks.h.command", config: base + ws + "hooks: {h: {command: /nonexistent/hook, events: [input]}}\n"},
		{name: "unknown jail user", key: "agent.limits.user", config: base + "agent: {workspace: ./ws, limits: {user: no-such-user-here}}\n"},
		{name: "missing provider key file", key: "providers.p.api_key_file",
			config: base + ws + "providers: {p: {api: openai-completions, api_key_file: ./none, models: [{id: m}]}}\n"},
		// What both took, to do something else than it says.
		{name: "negative duration", key: "agent.idle_evict", config: base + "agent: {workspace: ./ws, idle_evict: -1s}\n"},
		{name: "negative tool timeout", key: "agent.tool_timeout", config: base + "agent: {workspace: ./ws, tool_timeout: -1s}\n"},
		{name: "negative retry delay", key: "agent.retry.base_delay", config: base + "agent: {workspace: ./ws, retry: {base_delay: -1s}}\n"},
		{name: "missing system_prompt_file", key: "agent.system_prompt_file", config: base + "agent: {workspace: ./ws, system_prompt_file: ./prompt.md}\n"},
		{name: "owner on an unknown platform", key: "access.owners[0]", config: base + ws + "access: {owners: ['telegarm:1']}\n"},
		{name: "telegram webhook_url without webhook mode", key: "adapters.telegram.webhook_url",
			config: base + ws + "adapters: {telegram: {token: '1:a', webhook_url: 'https://bot.example/tg'}}\n"},
		{name: "negative price", key: "providers.p.models[0].cost",
			config: base + ws + "providers: {p: {api: faux, models: [{id: m, cost: {input: -1}}]}}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			cfg := writeFile(t, dir, "c.yaml", tt.config)
			check := refusal(t, dir, "config", "check", "-c", cfg)
			serve := refusal(t, dir, "serve", "-c", cfg)
			if !slices.Equal(check, serve) {
				t.Fatalf("config check and serve disagree:\ncheck: %q\nserve: %q", check, serve)
			}
			if !slices.ContainsFunc(check, func(l string) bool { return strings.Contains(l, tt.key) }) {
				t.Fatalf("no error names %s: %q", tt.key, check)
			}
		})
	}
}

// refusal runs pibot args in dir, wants it to exit 1 within 20 s, and
// returns its error lines (the problems under the "pibot: FILE:" line).
func refusal(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("pibot %s: %v, want exit 1\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	var lines []string
	for _, l := range strings.Split(errb.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "pibot: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("pibot %s printed no problem: %q", strings.Join(args, " "), errb.String())
	}
	return lines
}

// TestConfigPlatformsMatchAdapters keeps config's platform names (what
// access.owners, access.users, access.groups and schedules accept) equal
// to the adapters'.
func TestConfigPlatformsMatchAdapters(t *testing.T) {
	var real []string
	for _, a := range []chat.Adapter{(*telegram.Adapter)(nil), (*slack.Adapter)(nil), (*discord.Adapter)(nil), (*web.Adapter)(nil), (*term.Adapter)(nil)} {
		real = append(real, string(a.Platform()))
	}
	want := config.Platforms()
	slices.Sort(real)
	slices.Sort(want)
	if !slices.Equal(real, want) {
		t.Fatalf("config.Platforms() = %v, the adapters are %v", want, real)
	}
}

// TestImageConfigServes: the container image's configuration
// (deploy/docker/config.yaml), with each platform's variables set or
// unset, passes serve's start checks, and serve's adapter builder makes
// exactly the platforms whose tokens are set: an empty token variable
// leaves its platform off, never an error.
func TestImageConfigServes(t *testing.T) {
	webToken := strings.Repeat("ab", 16)
	tests := []struct {
		name string
		env  map[string]string
		want []chat.Platform
	}{
		{"nothing set", map[string]string{}, []chat.Platform{web.Platform}},
		{"web off", map[string]string{"PIBOT_WEB": "false"}, nil},
		{"telegram", map[string]string{"TELEGRAM_BOT_TOKEN": "1:x"}, []chat.Platform{web.Platform, "telegram"}},
		{"slack socket", map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1"}, []chat.Platform{web.Platform, "slack"}},
		{"slack http", map[string]string{"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_MODE": "http", "SLACK_SIGNING_SECRET": "s3cret"},
			[]chat.Platform{web.Platform, "slack"}},
		{"discord", map[string]string{"DISCORD_BOT_TOKEN": "abc.def"}, []chat.Platform{web.Platform, "discord"}},
		{"all", map[string]string{"TELEGRAM_BOT_TOKEN": "1:x", "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xapp-1", "DISCORD_BOT_TOKEN": "abc.def"},
			[]chat.Platform{web.Platform, "telegram", "slack", "discord"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := tt.env["PIBOT_WEB"]; !ok {
				tt.env["PIBOT_WEB_TOKEN"] = webToken
			}
			getenv := func(k string) string { return tt.env[k] }
			c := &cli{stdout: io.Discard, stderr: io.Discard, getenv: getenv}
			cfg, _, err := c.loadConfig(filepath.Join("..", "..", "deploy", "docker", "config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			// The image's /data volume, here.
			dir := t.TempDir()
			cfg.DataDir, cfg.Agent.Workspace = filepath.Join(dir, "state"), filepath.Join(dir, "workspace")
			if err := os.Mkdir(cfg.Agent.Workspace, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := startChecks(t.Context(), c, cfg); err != nil {
				t.Fatalf("serve would refuse: %v", err)
			}
			adapters, err := serveCmd{c}.adapters(cfg, slog.New(slog.DiscardHandler), http.NewServeMux(), cluster.NewRates(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []chat.Platform
			for _, a := range adapters {
				got = append(got, a.Platform())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("adapters %v, want %v", got, tt.want)
			}
		})
	}
}
