package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// TestServeTelegramRefusedToken replays a bogus Telegram token: the fake
// Bot API answers 401, /readyz fails naming telegram, one clear line is
// logged, and pibot keeps serving (its web chat answers /healthz).
func TestServeTelegramRefusedToken(t *testing.T) {
	t.Parallel()
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

// TestServeReadyWhileBotAPIHangs: a Bot API that does not answer holds
// neither the start nor /readyz: serve says it is ready, /readyz answers
// at once that Telegram is starting (its platform named once), and once
// the Bot API answers, the adapter connects and the command menu is
// registered in the background.
func TestServeReadyWhileBotAPIHangs(t *testing.T) {
	const token = "333:hanging-api-token"
	tg := telegramtest.New(token)
	t.Cleanup(tg.Close)
	upstream, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			proxy.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"adapters:\n  web:\n    enabled: false\n  telegram:\n    token: \""+token+"\"\n    api_url: "+hang.URL+"\n")
	s := startServe(t, dir, "-c", cfg, "--listen", "127.0.0.1:0") // fails unless ready while the API hangs
	// pibot is ready before the adapter's goroutine has asked getMe; from
	// then on, /readyz says the adapter is starting until the API answers.
	code, body := s.get(t, "/readyz")
	for deadline := time.Now().Add(10 * time.Second); code == http.StatusOK && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		code, body = s.get(t, "/readyz")
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "telegram: starting") || strings.Contains(body, "telegram: telegram:") {
		t.Errorf("/readyz while the Bot API hangs = %d %q", code, body)
	}
	close(release)
	released = true
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body = s.get(t, "/readyz")
		if code == http.StatusOK && len(tg.Commands()) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the Bot API answered: /readyz = %d %q, %d commands; stderr:\n%s", code, body, len(tg.Commands()), s.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop(t)
	if logs := s.stderr.String(); strings.Contains(logs, "telegram: telegram:") || strings.Contains(logs, "hanging-api-token") {
		t.Errorf("a doubled prefix or the token in the log:\n%s", logs)
	}
}
