package slack

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
)

// rewrite returns body (JSON) with its team and app ids replaced: the
// team_id and api_app_id fields, and an interaction's team.id.
func rewrite(t *testing.T, body []byte, team, app string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if team != "" {
		if _, ok := m["team_id"]; ok {
			m["team_id"] = team
		}
		if tm, ok := m["team"].(map[string]any); ok {
			tm["id"] = team
		}
	}
	if app != "" {
		m["api_app_id"] = app
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Deliveries of another workspace than auth.test's (an org-wide app's
// other workspace) are acknowledged and dropped over HTTP: events, slash
// commands and button presses alike. Each is counted; the log names the
// workspace once. The own workspace's deliveries still arrive (issue #30.7).
func TestHTTPForeignWorkspaceDropped(t *testing.T) {
	h := newHarness(t, ModeHTTP)
	h.run(t)
	u := serveHTTP(t, h)
	_, bodies := h.srv.Post(slacktest.Say{Channel: "D100", User: "UOWNER", Text: "run this as the owner"})
	cmd := h.srv.SlashCommand("D100", "UOWNER", "/pi", "status")
	cmd.Set("team_id", "T0666")
	ref, err := h.a.Send(t.Context(), dm(), chatOut("Allow?", "ap:1"))
	if err != nil {
		t.Fatal(err)
	}
	press, ok := h.srv.Press("D100", ref.ID, "UOWNER", "ap:1")
	if !ok {
		t.Fatal("no button")
	}
	for name, payload := range map[string]any{
		"event":         rewrite(t, bodies[0], "T0666", ""),
		"event again":   rewrite(t, bodies[0], "T0666", ""),
		"slash command": cmd,
		"press":         slacktest.Interaction(rewrite(t, press, "T0666", "")),
	} {
		if code, _ := do(t, h.srv.Request(u, payload, 0)); code != http.StatusOK {
			t.Errorf("%s: HTTP %d, want 200 (acknowledged, so Slack does not send it again)", name, code)
		}
	}
	if got := h.inbound(); len(got) != 0 {
		t.Fatalf("deliveries of another workspace reached the sink: %+v", got)
	}
	if n := h.a.ForeignDropped(); n != 4 {
		t.Errorf("ForeignDropped = %d, want 4", n)
	}
	if n := strings.Count(h.log.String(), "another workspace or app"); n != 1 {
		t.Errorf("the foreign workspace logged %d times, want once:\n%s", n, h.log.String())
	}
	if code, _ := do(t, h.srv.Request(u, bodies[0], 0)); code != http.StatusOK || len(h.inbound()) != 1 {
		t.Fatalf("the own workspace's event: HTTP %d, sink got %d", code, len(h.inbound()))
	}
}

// Over Socket Mode, an envelope for another app (api_app_id other than
// the one the connection's hello names) or another workspace is
// acknowledged and dropped.
func TestSocketForeignAppDropped(t *testing.T) {
	h := newHarness(t, "")
	h.run(t)
	waitFor(t, "the app id from hello", func() bool { return h.a.rd.identity().appID == "A0001" })
	_, bodies := h.srv.Post(slacktest.Say{Channel: "D100", User: "UOWNER", Text: "for another app"})
	cmd := slacktest.SlashJSON(h.srv.SlashCommand("D100", "UOWNER", "/pi", "status"))
	for name, d := range map[string]struct {
		kind string
		body []byte
	}{
		"other app's event":    {"events_api", rewrite(t, bodies[0], "", "A0666")},
		"other team's event":   {"events_api", rewrite(t, bodies[0], "T0666", "")},
		"other app's command":  {"slash_commands", rewrite(t, cmd, "", "A0666")},
		"other team's command": {"slash_commands", rewrite(t, cmd, "T0666", "")},
	} {
		if err := h.srv.WaitAck(h.srv.Deliver(d.kind, d.body), 10*time.Second); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := h.inbound(); len(got) != 0 {
		t.Fatalf("deliveries for another app or workspace reached the sink: %+v", got)
	}
	if n := h.a.ForeignDropped(); n != 4 {
		t.Errorf("ForeignDropped = %d, want 4", n)
	}
	if err := h.srv.WaitAck(h.srv.Deliver("events_api", bodies[0]), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := h.inbound(); len(got) != 1 || got[0].Text != "for another app" {
		t.Fatalf("the own app's event: sink got %+v", got)
	}
}
