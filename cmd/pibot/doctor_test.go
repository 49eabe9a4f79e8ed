package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/internal/tinyfs"
)

// fakeOpenAI is an OpenAI-compatible model list that accepts one key.
func fakeOpenAI(t *testing.T, key string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "Incorrect API key provided", "code": "invalid_api_key"}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []map[string]any{{"id": "m1"}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func TestDoctor(t *testing.T) {
	const tgGood, keyGood = "111:good-telegram-token", "sk-good-provider-key"
	tg := telegramtest.New(tgGood, telegramtest.WithUsername("doctor_bot"))
	defer tg.Close()
	models := fakeOpenAI(t, keyGood)
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := func(name, tgToken, key string) string {
		return writeFile(t, dir, name, `data_dir: `+filepath.Join(dir, "data")+`
agent:
  model: p/m1
  workspace: `+ws+`
  sandbox: off
adapters:
  web: {enabled: false}
  telegram:
    token: "`+tgToken+`"
    api_url: `+tg.URL+`
providers:
  p:
    api: openai-completions
    base_url: `+models+`
    api_key: `+key+`
    models: [{id: m1}]
`)
	}
	tests := []struct {
		name   string
		file   string
		code   int
		want   []string
		secret string
	}{
		{"all good", conf("good.yaml", tgGood, keyGood), 0,
			[]string{"ok    telegram", "@doctor_bot", "ok    provider p", "1 models listed", "ok    model", "p/m1", "ok    http", "ok    data_dir",
				"ok    workspace", "are on the same file system: the tools keep agent.limits.disk_reserve (1GiB) free there",
				"ok    sandbox", "everything looks right"}, ""},
		{"rejected telegram token", conf("tg.yaml", "111:revoked", keyGood), 1,
			[]string{"FAIL  telegram", "token rejected by getMe (401", "set adapters.telegram.token", "ok    provider p", "1 problem(s)"}, "111:revoked"},
		{"bad provider key", conf("key.yaml", tgGood, "sk-wrong-key"), 1,
			[]string{"FAIL  provider p", "key rejected (401", "Incorrect API key", "providers.p.api_key", "1 problem(s)"}, "sk-wrong-key"},
		{"invalid config", writeFile(t, dir, "bad.yaml", "agent:\n  queue: {mode: shout}\n"), 1,
			[]string{"FAIL  config", "agent.queue.mode"}, ""},
		{"unknown model", writeFile(t, dir, "model.yaml", "data_dir: ./d\nagent: {model: g/m, sandbox: off}\nadapters: {web: {enabled: false}}\nproviders: {f: {api: faux, models: [{id: m}]}}\n"), 1,
			[]string{"FAIL  model", "agent.model g/m", `provider "g" is not configured`, "pibot models", "ok    provider f"}, ""},
		{"weak web token off loopback", writeFile(t, dir, "web.yaml", "data_dir: ./d\nhttp: {listen: '0.0.0.0:8080'}\nagent: {model: f/m, sandbox: off}\nadapters: {web: {token: tiny-tok}}\nproviders: {f: {api: faux, models: [{id: m}]}}\n"), 1,
			[]string{"FAIL  http", "too short", "fix adapters.web.token", "ok    model"}, "tiny-tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pibot(t, dir, "", nil, "doctor", "-c", tt.file)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if tt.secret != "" && strings.Contains(r.stdout+r.stderr, tt.secret) {
				t.Errorf("the output shows the secret %q:\n%s%s", tt.secret, r.stdout, r.stderr)
			}
		})
	}
}

// TestDoctorWorkspaceOnItsOwnFileSystem: a workspace on a file system of
// its own is ok; one shared with data_dir is ok while the disk reserve
// keeps them apart (the quick start's layout) and says so, and a warning
// without a reserve.
func TestDoctorWorkspaceOnItsOwnFileSystem(t *testing.T) {
	dir := t.TempDir()
	check := func(ws, extra, want string) {
		t.Helper()
		conf := writeFile(t, dir, "c.yaml", "data_dir: "+filepath.Join(dir, "data")+"\nagent:\n  workspace: "+ws+extra+"\n  sandbox: off\nadapters: {web: {enabled: false}}\n")
		if r := pibot(t, dir, "", nil, "doctor", "-c", conf); !strings.Contains(r.stdout, want) {
			t.Errorf("workspace %s%s: stdout lacks %q:\n%s", ws, extra, want, r.stdout)
		}
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	check(ws, "", "ok    workspace")
	check(ws, "", "are on the same file system: the tools keep agent.limits.disk_reserve (1GiB) free there")
	check(ws, "\n  limits: {disk_reserve: 0}", "WARN  workspace")
	check(ws, "\n  limits: {disk_reserve: 0}", "a full workspace would stop pibot from saving messages, and agent.limits.disk_reserve is 0")
	check(tinyfs.Mount(t, 1<<20), "", "ok    workspace")
}

func TestHealthcheck(t *testing.T) {
	dir := t.TempDir()
	s := startServe(t, dir, "--listen", "127.0.0.1:0")
	addr := strings.TrimPrefix(s.url, "http://")
	conf := writeFile(t, dir, "hc.yaml", "http:\n  listen: "+addr+"\n")
	if out := ok(t, dir, "healthcheck", "-c", conf); !strings.Contains(out, "/healthz: ok") {
		t.Errorf("healthcheck printed %q", out)
	}
	if out := ok(t, dir, "healthcheck", "-c", conf, "--ready"); !strings.Contains(out, "/readyz: ok") {
		t.Errorf("healthcheck --ready printed %q", out)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	r := pibot(t, dir, "", nil, "healthcheck", "-c", conf)
	if r.code != 1 || !strings.Contains(r.stderr, "healthcheck:") {
		t.Errorf("after stop: exit %d, stderr %q; want 1 and the reason", r.code, r.stderr)
	}
}

func TestProbeBase(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"0.0.0.0:8080", "http://127.0.0.1:8080"},
		{":9090", "http://127.0.0.1:9090"},
		{"[::]:8080", "http://[::1]:8080"},
		{"[::1]:8080", "http://[::1]:8080"},
		{"pibot.internal:80", "http://pibot.internal:80"},
	}
	for _, tt := range tests {
		if got, err := probeBase(tt.listen); err != nil || got != tt.want {
			t.Errorf("probeBase(%q) = %q, %v; want %q", tt.listen, got, err, tt.want)
		}
	}
	if _, err := probeBase("8080"); err == nil {
		t.Error("probeBase(\"8080\") = nil error")
	}
}

// doctor checks every platform's token where serve's adapter would use
// it: tokens given as files (systemd credentials, Docker secrets) are
// read, api_url is resolved as the adapter resolves it (Discord's REST
// root is API_URL/api/v10), and serve, started from the same file, works
// against the same fakes. A rejected token is reported as rejected, a
// missing file names its key, a wrong api_url names api_url.
func TestDoctorChecksWhatServeUses(t *testing.T) {
	t.Parallel()
	const tgToken = "222:file-telegram-token"
	tg := telegramtest.New(tgToken, telegramtest.WithUsername("files_bot"))
	defer tg.Close()
	sl := slacktest.New()
	defer sl.Close()
	dc := discordtest.New(discordTestToken)
	defer dc.Close()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "credentials")
	if err := os.Mkdir(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	// put writes the credential files; a trailing newline, as `echo`
	// leaves it, is not part of the token.
	put := func(tgTok, bot, app, discord string) {
		for name, v := range map[string]string{"telegram": tgTok, "slack_bot": bot, "slack_app": app, "discord": discord} {
			writeFile(t, secrets, name, v+"\n")
		}
	}
	conf := func(name, discordURL string) string {
		return writeFile(t, dir, name, fauxConfig+`  workspace: ./ws
  sandbox: off
adapters:
  web: {enabled: false}
  telegram:
    token_file: `+filepath.Join(secrets, "telegram")+`
    api_url: `+tg.URL+`
  slack:
    bot_token_file: `+filepath.Join(secrets, "slack_bot")+`
    app_token_file: `+filepath.Join(secrets, "slack_app")+`
    api_url: `+sl.APIURL+`
  discord:
    token_file: `+filepath.Join(secrets, "discord")+`
    api_url: `+discordURL+`
`)
	}
	good := conf("good.yaml", dc.URL)
	if err := os.Mkdir(filepath.Join(dir, "ws"), 0o700); err != nil {
		t.Fatal(err)
	}
	doctorRun := func(t *testing.T, file string, code int, want, notWant []string) string {
		t.Helper()
		r := pibot(t, dir, "", nil, "doctor", "-c", file)
		if r.code != code {
			t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
			}
		}
		for _, w := range notWant {
			if strings.Contains(r.stdout, w) {
				t.Errorf("stdout has %q:\n%s", w, r.stdout)
			}
		}
		for _, secret := range []string{tgToken, sl.BotToken, sl.AppToken, discordTestToken, "wrong-"} {
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("the output shows a secret %q", secret)
			}
		}
		return r.stdout
	}

	t.Run("token files and api_url", func(t *testing.T) {
		put(tgToken, sl.BotToken, sl.AppToken, discordTestToken)
		doctorRun(t, good, 0, []string{"ok    telegram", "@files_bot", "ok    slack ", "auth.test", "ok    slack app token",
			"ok    discord", "bot pibot (users/@me)", "everything looks right"}, nil)
		var me []discordtest.Call
		for _, c := range dc.Calls() {
			if c.Route == "/users/@me" {
				me = append(me, c)
			}
		}
		if len(me) != 1 || me[0].Status != http.StatusOK {
			t.Errorf("doctor's users/@me calls at the fake's /api/v10: %+v", me)
		}
	})

	t.Run("serve uses the same", func(t *testing.T) {
		put(tgToken, sl.BotToken, sl.AppToken, discordTestToken)
		getMes := len(tg.Calls("getMe"))
		s := startServe(t, dir, "-c", good, "--listen", "127.0.0.1:0")
		if err := sl.WaitConnected(1, 15*time.Second); err != nil {
			t.Errorf("serve's Slack adapter did not connect with the app token file: %v", err)
		}
		deadline := time.Now().Add(15 * time.Second)
		for dc.Identifies() == 0 || len(tg.Calls("getMe")) == getMes {
			if time.Now().After(deadline) {
				t.Fatalf("serve's Discord or Telegram adapter made no call: identifies %d, getMe %d\nstderr:\n%s",
					dc.Identifies(), len(tg.Calls("getMe"))-getMes, s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if code, body := s.get(t, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz = %d %q", code, body)
		}
		for _, c := range dc.Calls() {
			if c.Status == http.StatusUnauthorized {
				t.Errorf("serve's Discord call %s %s was refused", c.Method, c.Route)
			}
		}
		for _, c := range tg.Calls() {
			if c.Code == http.StatusUnauthorized {
				t.Errorf("serve's Telegram call %s was refused", c.Method)
			}
		}
		if code := s.stop(t); code != 0 {
			t.Errorf("serve exit %d; stderr:\n%s", code, s.stderr)
		}
	})

	t.Run("rejected tokens", func(t *testing.T) {
		put("222:wrong-telegram", "xoxb-wrong-bot", "xapp-wrong-app", "wrong-discord.token")
		doctorRun(t, good, 1, []string{"FAIL  telegram", "token rejected by getMe (401", "FAIL  slack ", "token rejected by auth.test (invalid_auth)",
			"FAIL  slack app token", "token rejected by apps.connections.open (invalid_auth)", "FAIL  discord", "token rejected by users/@me (401",
			"4 problem(s)"}, []string{"may be down", "404"})
	})

	t.Run("missing file", func(t *testing.T) {
		put(tgToken, sl.BotToken, sl.AppToken, discordTestToken)
		if err := os.Remove(filepath.Join(secrets, "discord")); err != nil {
			t.Fatal(err)
		}
		doctorRun(t, good, 1, []string{"FAIL  discord", "adapters.discord.token_file", "no such file", "make the file readable", "ok    telegram", "1 problem(s)"}, nil)
	})

	t.Run("api_url of another service", func(t *testing.T) {
		put(tgToken, sl.BotToken, sl.AppToken, discordTestToken)
		nothing := httptest.NewServer(http.NotFoundHandler())
		defer nothing.Close()
		doctorRun(t, conf("nothing.yaml", nothing.URL), 1, []string{"FAIL  discord", "no such API method", "404 Not Found", "check adapters.discord.api_url"},
			[]string{"may be down"})
		doctorRun(t, conf("slack.yaml", sl.URL), 1, []string{"FAIL  discord", "answered, but not as the API does", "check adapters.discord.api_url"},
			[]string{"may be down"})
	})
}
