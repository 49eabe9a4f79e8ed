package slack

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
)

func serveHTTP(t *testing.T, h *harness) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST "+EventsPath, h.a.EventsHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + EventsPath
}

func do(t *testing.T, r *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Requests with a bad signature, another secret, a stale or missing
// timestamp are refused with 401 before anything is parsed; nothing
// reaches the sink.
func TestHTTPSignature(t *testing.T) {
	h := newHarness(t, ModeHTTP)
	h.run(t)
	u := serveHTTP(t, h)
	_, bodies := h.srv.Post(slacktest.Say{Channel: "D1", User: "U1", Text: "run rm -rf"})
	attacks := map[string]func(r *http.Request){
		"bad signature": func(r *http.Request) { r.Header.Set("X-Slack-Signature", "v0=00"+strings.Repeat("ab", 31)) },
		"other secret": func(r *http.Request) {
			ts, _ := strconv.ParseInt(r.Header.Get("X-Slack-Request-Timestamp"), 10, 64)
			r.Header.Set("X-Slack-Signature", slacktest.Sign("another-secret", ts, bodies[0]))
		},
		"stale timestamp": func(r *http.Request) {
			ts := time.Now().Add(-6 * time.Minute).Unix()
			r.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
			r.Header.Set("X-Slack-Signature", slacktest.Sign(h.srv.SigningSecret, ts, bodies[0]))
		},
		"no signature": func(r *http.Request) { r.Header.Del("X-Slack-Signature") },
		"no timestamp": func(r *http.Request) { r.Header.Del("X-Slack-Request-Timestamp") },
	}
	for name, tamper := range attacks {
		r := h.srv.Request(u, bodies[0], 0)
		tamper(r)
		if code, _ := do(t, r); code != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", name, code)
		}
	}
	if got := h.inbound(); len(got) != 0 {
		t.Fatalf("a refused request reached the sink: %+v", got)
	}
	if code, _ := do(t, h.srv.Request(u, bodies[0], 0)); code != http.StatusOK {
		t.Fatalf("a signed request: HTTP %d", code)
	}
	if len(h.inbound()) != 1 {
		t.Error("the signed request did not reach the sink")
	}
}

func TestHTTPDeliveries(t *testing.T) {
	h := newHarness(t, ModeHTTP)
	u := serveHTTP(t, h)
	_, bodies := h.srv.Post(slacktest.Say{Channel: "C1", User: "U1", Text: "<@UBOT> hi"})
	if code, _ := do(t, h.srv.Request(u, bodies[0], 0)); code != http.StatusServiceUnavailable {
		t.Errorf("before Run: HTTP %d, want 503 (Slack retries)", code)
	}
	h.run(t)
	code, body := do(t, h.srv.Request(u, []byte(`{"type":"url_verification","challenge":"c-123"}`), 0))
	if code != http.StatusOK || body != "c-123" {
		t.Errorf("url_verification: %d %q", code, body)
	}
	// The event, a retry of it and its app_mention twin: 200 each, one key.
	for i, b := range [][]byte{bodies[0], bodies[0], bodies[1]} {
		if code, _ := do(t, h.srv.Request(u, b, i)); code != http.StatusOK {
			t.Fatalf("delivery %d: HTTP %d", i, code)
		}
	}
	got := h.inbound()
	if len(got) != 3 || got[0].DedupKey != got[1].DedupKey || got[1].DedupKey != got[2].DedupKey {
		t.Fatalf("deliveries %+v", got)
	}
	// Not durable: 500, so Slack retries.
	h.mu.Lock()
	h.fail = true
	h.mu.Unlock()
	if code, _ := do(t, h.srv.Request(u, bodies[0], 1)); code != http.StatusInternalServerError {
		t.Errorf("sink refused: HTTP %d, want 500", code)
	}
	h.mu.Lock()
	h.fail = false
	h.mu.Unlock()
	// A slash command (form) and a button press (payload field).
	if code, _ := do(t, h.srv.Request(u, h.srv.SlashCommand("D1", "U1", "/pi", "status"), 0)); code != http.StatusOK {
		t.Fatalf("slash command: HTTP %d", code)
	}
	ref, err := h.a.Send(t.Context(), dm(), chatOut("Allow?", "ap:1"))
	if err != nil {
		t.Fatal(err)
	}
	payload, ok := h.srv.Press("D100", ref.ID, "U1", "ap:1")
	if !ok {
		t.Fatal("no button")
	}
	if code, _ := do(t, h.srv.Request(u, slacktest.Interaction(payload), 0)); code != http.StatusOK {
		t.Fatalf("press: HTTP %d", code)
	}
	got = h.inbound()
	cmd, press := got[len(got)-2], got[len(got)-1]
	if cmd.Command == nil || cmd.Command.Name != "status" || cmd.Interaction == nil || !cmd.Conv.DM {
		t.Errorf("slash command %+v", cmd)
	}
	if press.Action == nil || press.Action.Data != "ap:1" || press.Action.Msg.ID != ref.ID || press.Interaction == nil {
		t.Errorf("press %+v", press)
	}
	// A body over the limit is refused without reaching the sink.
	big := h.srv.Request(u, []byte(`{"type":"event_callback","event":{"text":"`+strings.Repeat("x", maxEventBytes)+`"}}`), 0)
	if code, _ := do(t, big); code == http.StatusOK {
		t.Error("an oversized body was accepted")
	}
}
