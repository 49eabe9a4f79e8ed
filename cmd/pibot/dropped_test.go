package main

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/config"
)

// TestServeSenderBudget: access.budget sets the per-sender budget of the
// real binary. With one message a minute and no burst, a listed user's
// second message is not processed, the user is told so, and /metrics
// counts it in pibot_sender_budget_dropped_total (issue #30.9).
func TestServeSenderBudget(t *testing.T) {
	t.Parallel()
	srv := slacktest.New()
	defer srv.Close()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"access:\n  owners: [\"slack:UOWNER\"]\n  users: [\"slack:UBOB\"]\n"+
		"  budget:\n    per_minute: 1\n    burst: 1\n"+
		"adapters:\n  web:\n    enabled: false\n  slack:\n"+
		"    bot_token: "+srv.BotToken+"\n    app_token: "+srv.AppToken+"\n    mode: socket\n    api_url: "+srv.APIURL+"\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	if err := srv.WaitConnected(1, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	say := func(text string) {
		t.Helper()
		_, bodies := srv.Post(slacktest.Say{Channel: "D300", User: "UBOB", Text: text})
		if err := srv.WaitAck(srv.Deliver("events_api", bodies[0]), 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	bot := func() string {
		var out []string
		for _, m := range srv.Messages("D300") {
			if m.User == srv.BotUserID {
				out = append(out, m.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	wait := func(what, sub string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !strings.Contains(bot(), sub) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s; bot messages %q\nstderr:\n%s", what, bot(), s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	say("first message")
	wait("answer", "You said: first message")
	say("second message")
	wait("notice", "this one was not processed")
	if strings.Contains(bot(), "You said: second message") {
		t.Fatal("a message over the budget was processed")
	}
	code, body := s.get(t, "/metrics")
	if m := regexp.MustCompile(`(?m)^pibot_sender_budget_dropped_total (\S+)$`).FindStringSubmatch(body); code != 200 || m == nil || m[1] != "1" {
		t.Fatalf("/metrics = %d, pibot_sender_budget_dropped_total %v; want 1", code, m)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
	}
}

// TestServeSlackForeignWorkspace: the real binary drops an event of
// another workspace than its bot token's (an org-wide app's other
// workspace) even from an owner's id, and counts it in
// pibot_foreign_events_total{platform="slack"} (issue #30.7).
func TestServeSlackForeignWorkspace(t *testing.T) {
	t.Parallel()
	srv := slacktest.New()
	defer srv.Close()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"access:\n  owners: [\"slack:UOWNER\"]\n"+
		"adapters:\n  web:\n    enabled: false\n  slack:\n"+
		"    bot_token: "+srv.BotToken+"\n    signing_secret: "+srv.SigningSecret+"\n    mode: http\n    api_url: "+srv.APIURL+"\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	post := func(body []byte) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			resp, err := http.DefaultClient.Do(srv.Request(s.url+"/slack/events", body, 0))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
				t.Fatalf("POST /slack/events = %d; stderr:\n%s", resp.StatusCode, s.stderr)
			}
			time.Sleep(50 * time.Millisecond) // the adapter is still starting
		}
	}
	_, foreign := srv.Post(slacktest.Say{Channel: "D100", User: "UOWNER", Text: "from the other workspace"})
	post([]byte(strings.Replace(string(foreign[0]), `"team_id":"`+srv.TeamID+`"`, `"team_id":"T0666"`, 1)))
	_, own := srv.Post(slacktest.Say{Channel: "D100", User: "UOWNER", Text: "from our workspace"})
	post(own[0])
	deadline := time.Now().Add(15 * time.Second)
	for !slices.ContainsFunc(srv.Messages("D100"), func(m slacktest.Message) bool {
		return m.User == srv.BotUserID && strings.Contains(m.Text, "You said: from our workspace")
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("the own workspace's message was not answered; stderr:\n%s", s.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, m := range srv.Messages("D100") {
		if m.User == srv.BotUserID && strings.Contains(m.Text, "other workspace") {
			t.Fatalf("the other workspace's event was answered: %q", m.Text)
		}
	}
	code, body := s.get(t, "/metrics")
	if m := regexp.MustCompile(`(?m)^pibot_foreign_events_total\{platform="slack"\} (\S+)$`).FindStringSubmatch(body); code != 200 || m == nil || m[1] != "1" {
		t.Fatalf("/metrics = %d, pibot_foreign_events_total %v; want 1", code, m)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, s.stderr)
	}
}

// access.budget.per_minute 0 turns the budget off; otherwise its rate
// and burst are access.budget's.
func TestSenderBudgetFromConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Access.Budget = config.Budget{PerMinute: 0, Burst: 5}
	if b := senderBudget(cfg); b != nil {
		t.Fatalf("per_minute 0: budget %v, want none", b)
	}
	cfg.Access.Budget = config.Budget{PerMinute: 60, Burst: 2}
	b := senderBudget(cfg)
	for i, want := range []bool{true, true, false} {
		wait, err := b.Reserve(t.Context(), "k")
		if err != nil || (wait == 0) != want {
			t.Fatalf("message %d: wait %v, %v; want within budget %v", i+1, wait, err, want)
		}
	}
	if wait, _ := b.Reserve(t.Context(), "k"); wait < time.Second || wait > 3*time.Second {
		t.Errorf("fourth message waits %v, want about 2s at 60 a minute", wait)
	}
}
