package slacktest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type answer struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Needed string `json:"needed"`
	TS     string `json:"ts"`
}

func form(t *testing.T, s *Server, method string, v url.Values) (int, http.Header, answer) {
	t.Helper()
	resp, err := http.PostForm(s.APIURL+method, v)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, resp.Header, a
}

// Tokens are checked per kind, in the form or as a Bearer header, and
// methods the fake does not serve answer unknown_method.
func TestTokensAndMethods(t *testing.T) {
	s := New()
	defer s.Close()
	tests := []struct {
		method, token, want string
	}{
		{"auth.test", s.BotToken, ""},
		{"auth.test", "", "not_authed"},
		{"auth.test", "xoxb-wrong", "invalid_auth"},
		{"auth.test", s.AppToken, "not_allowed_token_type"},
		{"apps.connections.open", s.BotToken, "not_allowed_token_type"},
		{"conversations.kick", s.BotToken, "unknown_method"},
	}
	for _, tt := range tests {
		_, _, a := form(t, s, tt.method, url.Values{"token": {tt.token}})
		if a.Error != tt.want || a.OK != (tt.want == "") {
			t.Errorf("%s with %q: %+v, want %q", tt.method, tt.token, a, tt.want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, s.APIURL+"apps.connections.open", bytes.NewReader(nil))
	req.Header.Set("Authorization", "Bearer "+s.AppToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var open struct {
		OK  bool   `json:"ok"`
		URL string `json:"url"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&open)
	resp.Body.Close()
	if !open.OK || !strings.HasPrefix(open.URL, "ws://") {
		t.Errorf("apps.connections.open with the app token as Bearer: %+v", open)
	}
}

// JSON bodies are read like forms; messages are recorded and updates
// follow Slack's rules.
func TestJSONBodiesAndMessages(t *testing.T) {
	s := New()
	defer s.Close()
	body, _ := json.Marshal(map[string]any{"channel": "C1", "text": "hello", "blocks": []any{}})
	req, _ := http.NewRequest(http.MethodPost, s.APIURL+"chat.postMessage", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.BotToken)
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if !a.OK || a.TS == "" {
		t.Fatalf("JSON chat.postMessage: %+v", a)
	}
	if c := s.CallsOf("chat.postMessage"); len(c) != 1 || c[0].Params["blocks"] != "[]" {
		t.Errorf("recorded %+v", c)
	}
	ts, _ := s.Post(Say{Channel: "C1", User: "U1", Text: "mine"})
	if _, _, a := form(t, s, "chat.update", url.Values{"token": {s.BotToken}, "channel": {"C1"}, "ts": {ts}, "text": {"x"}}); a.Error != "cant_update_message" {
		t.Errorf("updating a user's message: %+v", a)
	}
	if _, _, a := form(t, s, "chat.update", url.Values{"token": {s.BotToken}, "channel": {"C1"}, "ts": {"1.2"}, "text": {"x"}}); a.Error != "message_not_found" {
		t.Errorf("updating a missing message: %+v", a)
	}
	if _, _, a := form(t, s, "chat.startStream", url.Values{"token": {s.BotToken}, "channel": {"C1"}, "thread_ts": {ts}}); a.Error != "missing_recipient_user_id" {
		t.Errorf("a channel stream without a recipient: %+v", a)
	}
}

// The tier model answers 429 with Retry-After when a method's budget is
// spent, and a call inside an announced window is a violation.
func TestRateModel(t *testing.T) {
	s := New(WithLimits(map[string]float64{"chat.update": 6}))
	defer s.Close()
	_, _, a := form(t, s, "chat.postMessage", url.Values{"token": {s.BotToken}, "channel": {"C1"}, "text": {"m"}})
	var limited bool
	for range 5 {
		code, h, _ := form(t, s, "chat.update", url.Values{"token": {s.BotToken}, "channel": {"C1"}, "ts": {a.TS}, "text": {"e"}})
		if code == http.StatusTooManyRequests {
			limited = h.Get("Retry-After") != ""
			break
		}
	}
	if !limited {
		t.Fatal("no 429 with Retry-After after the budget was spent")
	}
	form(t, s, "chat.update", url.Values{"token": {s.BotToken}, "channel": {"C1"}, "ts": {a.TS}, "text": {"e"}})
	if v := s.Violations(); len(v) == 0 {
		t.Error("a call inside the window is not recorded")
	}
	s.Fail("reactions.add", 1, Fault{Kind: FaultError, Error: "missing_scope", Needed: "reactions:write"})
	if _, _, a := form(t, s, "reactions.add", url.Values{"token": {s.BotToken}}); a.Error != "missing_scope" || a.Needed != "reactions:write" {
		t.Errorf("injected missing_scope: %+v", a)
	}
}

// Signed requests verify with the signing secret.
func TestSign(t *testing.T) {
	s := New()
	defer s.Close()
	r := s.Request("http://127.0.0.1:1/slack/events", []byte(`{"a":1}`), 2)
	if !strings.HasPrefix(r.Header.Get("X-Slack-Signature"), "v0=") || r.Header.Get("X-Slack-Retry-Num") != "2" {
		t.Errorf("headers %v", r.Header)
	}
	ts := r.Header.Get("X-Slack-Request-Timestamp")
	if Sign(s.SigningSecret, mustInt(t, ts), []byte(`{"a":1}`)) != r.Header.Get("X-Slack-Signature") {
		t.Error("the signature does not match Sign")
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
