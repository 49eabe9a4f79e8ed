package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/config"
)

// TestServeReloadsOnSIGHUP: the real binary with a Slack adapter and an
// allowlist; a user not on it is ignored; the file lists them, SIGHUP,
// and they are let in. A changed key that needs a restart is named in the
// log, and not applied.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	srv := slacktest.New()
	defer srv.Close()
	// An OTLP collector: the traces of the messages are sent to it.
	var mu sync.Mutex
	var traces []string
	coll := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		traces = append(traces, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer coll.Close()
	dir := t.TempDir()
	conf := func(users, verbosity string) string {
		return "data_dir: ./data\nproviders:\n  f:\n    api: faux\n    models: [{id: m}]\nagent:\n  model: f/m\n  verbosity: " + verbosity + "\n" +
			"otel:\n  endpoint: " + coll.URL + "\n" +
			"access:\n  owners: [\"slack:UOWNER\"]\n  users: [" + users + "]\n  dm_policy: allowlist\nadapters:\n  web:\n    enabled: false\n  slack:\n" +
			"    bot_token: " + srv.BotToken + "\n    app_token: " + srv.AppToken + "\n    signing_secret: " + srv.SigningSecret + "\n" +
			"    mode: socket\n    api_url: " + srv.APIURL + "\n"
	}
	cfg := writeFile(t, dir, "c.yaml", conf("", "tools"))
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	if err := srv.WaitConnected(1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	say := func(text string) {
		t.Helper()
		_, bodies := srv.Post(slacktest.Say{Channel: "D200", User: "UNEW", Text: text})
		if err := srv.WaitAck(srv.Deliver("events_api", bodies[0]), 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	answers := func() []string {
		var out []string
		for _, m := range srv.Messages("D200") {
			if m.User == srv.BotUserID {
				out = append(out, m.Text)
			}
		}
		return out
	}
	say("before the reload")

	writeFile(t, dir, "c.yaml", conf(`"slack:UNEW"`, "verbose"))
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload is asynchronous: ask until the answer comes.
	deadline := time.Now().Add(20 * time.Second)
	for n := 1; !slices.ContainsFunc(answers(), func(a string) bool { return strings.Contains(a, "You said: after the reload") }); n++ {
		if time.Now().After(deadline) {
			t.Fatalf("the newly listed user was never answered; bot messages %q", answers())
		}
		say(fmt.Sprintf("after the reload %d", n))
		time.Sleep(200 * time.Millisecond)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
	}
	if slices.ContainsFunc(answers(), func(a string) bool { return strings.Contains(a, "before the reload") }) {
		t.Errorf("the message sent before the user was listed was answered: %q", answers())
	}
	log := s.stderr.String()
	i := strings.Index(log, "NOT applied")
	if i < 0 {
		t.Fatalf("the log does not say what was not reloaded:\n%s", log)
	}
	line, _, _ := strings.Cut(log[i:], "\n")
	if !strings.Contains(line, "agent.verbosity") || strings.Contains(line, "access") && !strings.Contains(line, "reloaded=") {
		t.Errorf("reload line %q: want agent.verbosity named as not reloaded", line)
	}
	mu.Lock()
	all := strings.Join(traces, "\n")
	mu.Unlock()
	for _, w := range []string{"/v1/traces ", `"name":"pibot.intake"`, `"name":"pibot.run"`, `"stringValue":"pibot"`} {
		if !strings.Contains(all, w) {
			t.Errorf("the collector got no %s; got:\n%.2000s", w, all)
		}
	}
	if strings.Contains(log, srv.BotToken) {
		t.Error("the log holds a secret")
	}
}

// TestChangedKeys names changed keys by their yaml path, skips the
// reloadable ones, and never names a value.
func TestChangedKeys(t *testing.T) {
	a := config.Default()
	b := config.Default()
	b.Access.Users = []string{"slack:U1"}
	b.Limits.Global.DailyUSD = 5
	b.Agent.Approvals.Group = map[string]string{"bash": "deny"}
	b.Agent.Approvals.Timeout = config.Duration(time.Minute)
	b.Adapter.Telegram.Token = "123:secret-token"
	b.HTTP.Listen = "0.0.0.0:1"
	b.Access.Budget.Burst = 3 // read at start only
	got := changedKeys(a, b, reloadable)
	want := []string{"http.listen", "agent.approvals.timeout", "adapters.telegram.token", "access.budget.burst"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("changedKeys = %q, want %q", got, want)
	}
	for _, k := range got {
		if strings.Contains(k, "secret") {
			t.Errorf("a value leaked into %q", k)
		}
	}
}

// agentSpendCaps gives the limiter each agent's caps under the key they
// are set at; an agent without caps has none.
func TestAgentSpendCaps(t *testing.T) {
	cfg, err := config.Parse(strings.NewReader(`
agent: {spend: {per_user: {daily_usd: 2}}}
agents:
  ops: {workspace: /srv/infra, spend: {global: {daily_tokens: 5000}}}
  web: {workspace: /srv/web}
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := agentSpendCaps(cfg)
	if len(got) != 2 || got["ops"].Key != "agents.ops.spend" || got["ops"].Global.Tokens != 5000 ||
		got["default"].Key != "agent.spend" || got["default"].PerUser.USD != 2 {
		t.Fatalf("agentSpendCaps = %+v", got)
	}
}
