package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/internal/tinyfs"
)

// run runs one check with the default timeout.
func run(t *testing.T, c Check) Finding {
	t.Helper()
	return Run(t.Context(), []Check{c}, 5*time.Second)[0]
}

// want checks a finding's status and that its text has every part and
// none of the forbidden ones (credentials).
func want(t *testing.T, f Finding, status Status, has []string, never ...string) {
	t.Helper()
	text := f.Check + " " + f.Detail + " " + f.Fix
	if f.Status != status {
		t.Errorf("status %v, want %v: %s", f.Status, status, text)
	}
	for _, h := range has {
		if !strings.Contains(text, h) {
			t.Errorf("finding %q lacks %q", text, h)
		}
	}
	for _, n := range never {
		if n != "" && strings.Contains(text, n) {
			t.Errorf("finding %q shows the credential %q", text, n)
		}
	}
}

func TestTelegram(t *testing.T) {
	const token = "123456:right-token"
	srv := telegramtest.New(token, telegramtest.WithUsername("pibot_test_bot"))
	defer srv.Close()
	tests := []struct {
		name, url, token string
		status           Status
		has              []string
	}{
		{"accepted", srv.URL, token, OK, []string{"@pibot_test_bot", "getMe"}},
		{"rejected", srv.URL, "123456:wrong-token", Fail, []string{"token rejected", "401", "set adapters.telegram.token"}},
		{"unreachable", "http://127.0.0.1:1", token, Fail, []string{"cannot reach 127.0.0.1:1", "adapters.telegram.api_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := run(t, Telegram(Cred{Name: "telegram", URL: tt.url, Token: tt.token, Key: "adapters.telegram.token", URLKey: "adapters.telegram.api_url"}))
			want(t, f, tt.status, tt.has, tt.token)
		})
	}
}

// fakeAPI answers path with ok when check(r) accepts the request's
// credential, and with the rejection otherwise.
func fakeAPI(t *testing.T, path string, check func(*http.Request) bool, ok any, rejStatus int, rej any) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if check(r) {
			_ = json.NewEncoder(w).Encode(ok)
			return
		}
		w.WriteHeader(rejStatus)
		_ = json.NewEncoder(w).Encode(rej)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSlackAndDiscord(t *testing.T) {
	slackURL := fakeAPI(t, "/api/auth.test", func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer xoxb-good" },
		map[string]any{"ok": true, "user": "pibot", "team": "Acme"}, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
	slackApp := fakeAPI(t, "/api/apps.connections.open", func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer xapp-good" },
		map[string]any{"ok": true, "url": "wss://example.invalid/link"}, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
	discordURL := fakeAPI(t, "/api/v10/users/@me", func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bot good.discord" },
		map[string]any{"id": "1", "username": "pibot"}, http.StatusUnauthorized, map[string]any{"message": "401: Unauthorized", "code": 0})
	tests := []struct {
		name   string
		check  Check
		secret string
		status Status
		has    []string
	}{
		{"slack ok", Slack(Cred{Name: "slack", URL: slackURL + "/api/", Token: "xoxb-good", Key: "adapters.slack.bot_token"}), "xoxb-good", OK, []string{"@pibot in Acme"}},
		{"slack rejected", Slack(Cred{Name: "slack", URL: slackURL + "/api", Token: "xoxb-bad", Key: "adapters.slack.bot_token"}), "xoxb-bad", Fail, []string{"invalid_auth", "adapters.slack.bot_token"}},
		{"slack wrong api_url", Slack(Cred{Name: "slack", URL: slackURL + "/v2/", Token: "xoxb-good", Key: "adapters.slack.bot_token", URLKey: "adapters.slack.api_url"}), "xoxb-good", Fail,
			[]string{"no such API method", "404", "check adapters.slack.api_url"}},
		{"slack app token ok", SlackApp(Cred{Name: "slack app token", URL: slackApp + "/api/", Token: "xapp-good", Key: "adapters.slack.app_token"}), "xapp-good", OK, []string{"apps.connections.open"}},
		{"slack app token rejected", SlackApp(Cred{Name: "slack app token", URL: slackApp + "/api/", Token: "xapp-bad", Key: "adapters.slack.app_token"}), "xapp-bad", Fail,
			[]string{"token rejected by apps.connections.open (invalid_auth)", "adapters.slack.app_token"}},
		{"discord ok", Discord(Cred{Name: "discord", URL: discordURL + "/api/v10", Token: "good.discord", Key: "adapters.discord.token"}), "good.discord", OK, []string{"bot pibot"}},
		{"discord rejected", Discord(Cred{Name: "discord", URL: discordURL + "/api/v10", Token: "bad.discord", Key: "adapters.discord.token"}), "bad.discord", Fail, []string{"401", "adapters.discord.token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, run(t, tt.check), tt.status, tt.has, tt.secret)
		})
	}
}

func TestProviderModels(t *testing.T) {
	list := map[string]any{"object": "list", "data": []map[string]any{{"id": "gpt-4.1"}, {"id": "gpt-4.1-mini"}}}
	oai := fakeAPI(t, "/v1/models", func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer sk-good" },
		list, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
	ant := fakeAPI(t, "/v1/models", func(r *http.Request) bool {
		return r.Header.Get("X-Api-Key") == "sk-ant-good" && r.Header.Get("Anthropic-Version") != ""
	}, list, http.StatusUnauthorized, map[string]any{"type": "error", "error": map[string]any{"type": "authentication_error", "message": "invalid x-api-key"}})
	tests := []struct {
		name   string
		check  Check
		secret string
		status Status
		has    []string
	}{
		{"openai ok", OpenAIModels(Cred{Name: "provider openai", URL: oai + "/v1", Token: "sk-good", Key: "providers.openai.api_key"}, []string{"gpt-4.1"}),
			"sk-good", OK, []string{"2 models"}},
		{"openai bad key", OpenAIModels(Cred{Name: "provider openai", URL: oai + "/v1", Token: "sk-bad", Key: "providers.openai.api_key"}, nil),
			"sk-bad", Fail, []string{"key rejected (401", "Incorrect API key", "providers.openai.api_key"}},
		{"openai unknown model", OpenAIModels(Cred{Name: "provider openai", URL: oai + "/v1/", Token: "sk-good", Key: "providers.openai.api_key"}, []string{"gpt-9"}),
			"sk-good", Warn, []string{"does not list gpt-9"}},
		{"openai wrong base url", OpenAIModels(Cred{Name: "provider local", URL: oai, Token: "sk-good", Key: "providers.local.api_key", URLKey: "providers.local.base_url"}, nil),
			"sk-good", Fail, []string{"no such API method", "404 Not Found", "check providers.local.base_url"}},
		{"anthropic ok", AnthropicModels(Cred{Name: "provider anthropic", URL: ant, Token: "sk-ant-good", Key: "providers.anthropic.api_key"}),
			"sk-ant-good", OK, []string{"2 models"}},
		{"anthropic bad key", AnthropicModels(Cred{Name: "provider anthropic", URL: ant, Token: "sk-ant-bad", Key: "providers.anthropic.api_key"}),
			"sk-ant-bad", Fail, []string{"key rejected (401", "authentication_error", "providers.anthropic.api_key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, run(t, tt.check), tt.status, tt.has, tt.secret)
		})
	}
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// nonLoopbackIP returns an address of this host off loopback, or skips.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Skip("no address off loopback")
	return ""
}

// fakeRedis answers each RESP command with the reply reply gives.
func fakeRedis(t *testing.T, reply func(cmd string) string) string {
	return fakeRedisOn(t, "127.0.0.1:0", reply)
}

// fakeRedisOn is fakeRedis listening on addr.
func fakeRedisOn(t *testing.T, addr string, reply func(cmd string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 512)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					// "*N\r\n$L\r\nCMD\r\n...": the command is the third line.
					lines := strings.Split(string(buf[:n]), "\r\n")
					if len(lines) < 3 {
						return
					}
					if _, err := c.Write([]byte(reply(strings.ToUpper(lines[2])) + "\r\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestRedis(t *testing.T) {
	noauth := fakeRedis(t, func(string) string { return "-NOAUTH Authentication required." })
	auth := fakeRedis(t, func(cmd string) string {
		if cmd == "AUTH" {
			return "-WRONGPASS invalid username-password pair"
		}
		return "+PONG"
	})
	tests := []struct {
		name, url string
		status    Status
		has       []string
		secret    string
	}{
		{"unreachable", "redis://" + closedPort(t) + "/0", Fail, []string{"cannot connect", "refused", "start Redis or fix cluster.redis_url"}, ""},
		{"not a URL", "127.0.0.1:6379", Fail, []string{"not a redis:// URL"}, ""},
		{"needs a password", "redis://" + noauth, Fail, []string{"NOAUTH", "put the password in cluster.redis_url"}, ""},
		{"wrong password", "redis://:s3cret-pw@" + auth, Fail, []string{"authentication refused", "WRONGPASS"}, "s3cret-pw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, run(t, Redis("redis", tt.url, "cluster.redis_url")), tt.status, tt.has, tt.secret)
		})
	}
	// Issue 30: a password-less Redis off loopback is a warning; on
	// loopback, or with a password, it is not.
	t.Run("open off loopback", func(t *testing.T) {
		ip := nonLoopbackIP(t)
		open := fakeRedisOn(t, net.JoinHostPort(ip, "0"), func(string) string { return "+PONG" })
		want(t, run(t, Redis("redis", "redis://"+open+"/0", "cluster.redis_url")), Warn, []string{"without a password", "set requirepass"})
		withPW := fakeRedisOn(t, net.JoinHostPort(ip, "0"), func(cmd string) string {
			if cmd == "AUTH" {
				return "+OK"
			}
			return "+PONG"
		})
		if f := run(t, Redis("redis", "redis://:pw-123456@"+withPW+"/0", "cluster.redis_url")); f.Status != OK {
			t.Errorf("with a password: %+v, want ok", f)
		}
		onLoopback := fakeRedis(t, func(string) string { return "+PONG" })
		if f := run(t, Redis("redis", "redis://"+onLoopback+"/0", "cluster.redis_url")); f.Status != OK {
			t.Errorf("on loopback: %+v, want ok", f)
		}
	})
	t.Run("real redis", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:6379", time.Second)
		if err != nil {
			t.Skip("no Redis on 127.0.0.1:6379")
		}
		c.Close()
		want(t, run(t, Redis("redis", "redis://127.0.0.1:6379/0", "cluster.redis_url")), OK, []string{"PING answered by 127.0.0.1:6379"})
	})
}

func TestDataDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir string
		minFree   uint64
		status    Status
		has       []string
	}{
		{"writable", dir, 1, OK, []string{"writable", "free"}},
		{"created on start", filepath.Join(dir, "a", "b"), 1, OK, []string{"will be created"}},
		{"not a directory", file, 1, Fail, []string{"is not a directory", "data_dir"}},
		{"below the free space floor", dir, 1 << 62, Fail, []string{"free (pibot wants at least", "free space"}},
		{"open to others", open, 1, Warn, []string{"open to other users", "chmod o-rwx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want(t, run(t, DataDir("data_dir", tt.dir, "data_dir", tt.minFree)), tt.status, tt.has)
		})
	}
	t.Run("full disk", func(t *testing.T) {
		full := tinyfs.Mount(t, 1<<20)
		tinyfs.Fill(t, full)
		want(t, run(t, DataDir("data_dir", full, "data_dir", 1)), Fail, []string{"is full", "no space left"})
	})
	t.Run("not writable", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes everywhere")
		}
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		want(t, run(t, DataDir("data_dir", ro, "data_dir", 1)), Fail, []string{"not writable", "chown"})
	})
}

func TestRunBoundsEveryCheck(t *testing.T) {
	stuck := Check{Name: "stuck", Run: func(ctx context.Context) Finding {
		<-ctx.Done()
		return Finding{Status: OK}
	}}
	quick := Check{Name: "quick", Run: func(context.Context) Finding { return okf("", "fine") }}
	got := Run(t.Context(), []Check{stuck, quick}, 50*time.Millisecond)
	want(t, got[0], Fail, []string{"stuck", "no answer within 50ms"})
	want(t, got[1], OK, []string{"quick", "fine"})
}

func TestReport(t *testing.T) {
	var b bytes.Buffer
	fails, warns := Report(&b, []Finding{
		{Check: "config", Status: OK, Detail: "pibot.yaml"},
		{Check: "sandbox", Status: Warn, Detail: "bwrap cannot create a sandbox", Fix: "allow user namespaces"},
		{Check: "provider openai", Status: Fail, Detail: "key rejected", Fix: "set providers.openai.api_key"},
	})
	if fails != 1 || warns != 1 {
		t.Errorf("Report = %d fails, %d warns; want 1, 1", fails, warns)
	}
	wantOut := "ok    config           pibot.yaml\n" +
		"WARN  sandbox          bwrap cannot create a sandbox: allow user namespaces\n" +
		"FAIL  provider openai  key rejected: set providers.openai.api_key\n" +
		"1 problem(s), 1 warning(s): fix the lines marked FAIL\n"
	if b.String() != wantOut {
		t.Errorf("Report wrote\n%s\nwant\n%s", b.String(), wantOut)
	}
}
