package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// TestServeTelegramRefusedToken replays a bogus Telegram token: the fake
// Bot API answers 401, /readyz fails naming telegram, one clear line is
// logged, and pibot keeps serving (its web chat answers /healthz).
func TestServeTelegramRefusedToken(t *testing.T) {
	const token = "111:the-bogus-telegram-token"
	tg := telegramtest.New("222:the-real-token")
	t.Cleanup(tg.Close)
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./d\nadapters:\n  telegram:\n    token: \""+token+"\"\n    api_url: "+tg.URL+"\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0")
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, body := s.get(t, "/readyz")
		if code == http.StatusServiceUnavailable && strings.Contains(body, "telegram") && strings.Contains(body, "adapters.telegram.token") {
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
	logs := s.stderr.String()
	if strings.Contains(logs, "bogus-telegram-token") {
		t.Errorf("the token is in the output:\n%s", logs)
	}
	n := 0
	for _, l := range strings.Split(logs, "\n") {
		if strings.HasPrefix(l, "time=") && strings.Contains(l, "was rejected") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d log lines about the rejected token in:\n%s", n, logs)
	}
}
