package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sseEvent is an event of the web chat's stream, as far as these tests
// look at it.
type sseEvent struct {
	Type, ID, From, Text, Error, Problem string
}

// webEvents streams conv's events from base until the test ends.
func webEvents(t *testing.T, base, conv string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events?conv="+conv, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan sseEvent, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev sseEvent
			if json.Unmarshal([]byte(data), &ev) == nil {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out
}

// waitEvent waits for an event that ok accepts.
func waitEvent(t *testing.T, evs <-chan sseEvent, what string, ok func(sseEvent) bool) sseEvent {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-evs:
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event: %s", what)
		}
	}
}

// webPost posts a message to the web chat and returns the status and
// body of the answer.
func webPost(t *testing.T, base, conv, id, text string) (int, string) {
	t.Helper()
	resp, err := http.Post(base+"/api/send", "application/json",
		strings.NewReader(`{"conv":"`+conv+`","id":"`+id+`","text":"`+text+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestWebChatRedisDown: a cluster replica's web chat, whose Redis becomes
// unreachable (a proxy in front of it is cut), answers a message with
// words and no internal error text, shows it beside the message (with
// the same words, for the page's Retry) and marks its header through a
// health event; once Redis answers, the header clears and the Retry (the
// same message id, sent twice) is admitted and answered exactly once. A
// message sent again under its id after it was taken is not taken twice.
// The log has one line for the outage and its end, and none of
// go-redis's own.
func TestWebChatRedisDown(t *testing.T) {
	t.Parallel()
	_, prefix := realRedis(t)
	px := newCutProxy(t, "127.0.0.1:6379")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+`cluster:
  redis_url: redis://`+px.addr+`/0
  lease_ttl: 1s
  key_prefix: "`+prefix+`"
  secret: "test cluster secret, 32 bytes at least"
`)
	s := startServe(t, dir, "-c", cfg, "--listen", freeListen(t))
	evs := webEvents(t, s.url, "c1")
	replied := func(text string) func(sseEvent) bool {
		return func(ev sseEvent) bool { return ev.Type == "msg" && ev.From == "bot" && strings.Contains(ev.Text, text) }
	}
	s.webSay(t, "c1", "m1", "before")
	waitEvent(t, evs, "the reply to before", replied("You said: before"))
	// Sent again under its id (a Retry whose first answer was lost):
	// taken once.
	if code, body := webPost(t, s.url, "c1", "m1", "before"); code != http.StatusOK {
		t.Fatalf("the same message again = %d %s", code, body)
	}

	px.cut()
	code, body := webPost(t, s.url, "c1", "m2", "during")
	if code != http.StatusServiceUnavailable {
		t.Fatalf("with Redis down POST /api/send = %d %q, want 503", code, body)
	}
	const words = "pibot's storage is unavailable right now, so it could not take this message. Press Retry in a moment."
	if body != words {
		t.Errorf("with Redis down the answer is %q, want %q", body, words)
	}
	// The message's error and the header's state come in either order.
	var refused sseEvent
	for health := false; refused.ID == "" || !health; {
		ev := waitEvent(t, evs, "the refused message with its error, and the degraded header", func(ev sseEvent) bool {
			return ev.Type == "msg" && ev.ID == "u-m2" && ev.Error != "" || ev.Type == "health" && ev.Problem != ""
		})
		if ev.Type == "health" {
			if ev.Problem != "storage unavailable, retrying" {
				t.Errorf("the header shows %q", ev.Problem)
			}
			health = true
		} else {
			refused = ev
		}
	}
	if refused.Error != words {
		t.Errorf("the message shows %q, want %q", refused.Error, words)
	}
	if _, info := s.get(t, "/api/info"); !strings.Contains(info, `"health":"storage unavailable, retrying"`) {
		t.Errorf("/api/info = %s", info)
	}
	// No notice from the bot either: the page shows the refusal.
	time.Sleep(500 * time.Millisecond)
	for done := false; !done; {
		select {
		case ev := <-evs:
			if ev.Type == "msg" && ev.From == "bot" {
				t.Errorf("a bot message while Redis was down: %q", ev.Text)
			}
		default:
			done = true
		}
	}

	px.restore(t)
	waitEvent(t, evs, "the header cleared", func(ev sseEvent) bool { return ev.Type == "health" && ev.Problem == "" })
	for range 2 { // Retry, pressed twice
		if code, body := webPost(t, s.url, "c1", "m2", "during"); code != http.StatusOK {
			s.stop(t)
			t.Fatalf("Retry after Redis came back = %d %q\n%s", code, body, s.stderr)
		}
	}
	waitEvent(t, evs, "the message's error cleared", func(ev sseEvent) bool { return ev.Type == "msg" && ev.ID == "u-m2" && ev.Error == "" })
	waitEvent(t, evs, "the reply to the retried message", replied("You said: during"))
	time.Sleep(time.Second) // a second run would show meanwhile
	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, s.stderr)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "data", "sessions", "*", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files %v", files)
	}
	sess := readFile(t, files[0])
	for _, text := range []string{`"before"`, `"during"`, `You said: before`, `You said: during`} {
		if n := strings.Count(sess, text); n != 1 {
			t.Errorf("the session holds %s %d times, want once:\n%s", text, n, sess)
		}
	}
	log := s.stderr.String()
	// Each failed call on Redis is not a line of its own: the lines that
	// quote its error are the outage's and the web relay's (which logs
	// its own failing and working again).
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "dial tcp") && !strings.Contains(line, "shared store (Redis) unreachable") &&
			!strings.Contains(line, "web chat: relay: publish failed") {
			t.Errorf("a line of a failed call beside the outage's: %s", line)
		}
	}
	if n := strings.Count(log, "shared store (Redis) unreachable"); n != 1 {
		t.Errorf("the outage logged %d times, want once:\n%s", n, log)
	}
	if !strings.Contains(log, "shared store (Redis) reachable again") {
		t.Errorf("the recovery is not logged:\n%s", log)
	}
}
