package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
)

// cutProxy forwards TCP connections to Redis until cut, and again after
// restore, on the same address: Redis unreachable for a while.
type cutProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{addr: freeListen(t), target: target}
	p.restore(t)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

// restore listens again.
func (p *cutProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln {
				// Cut while this connection was accepted and dialled:
				// it must not outlive the cut (a replica that dialled
				// just then would still reach Redis).
				p.mu.Unlock()
				c.Close()
				r.Close()
				continue
			}
			p.conns = append(p.conns, c, r)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(r, c); r.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, r); c.Close() })
		}
	})
}

// cut closes the listener and every connection: the port refuses.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestClusterRedisDownNotice: a replica in Telegram webhook mode whose
// Redis becomes unreachable refuses a delivery with a non-2xx (Telegram
// delivers it again) and tells the sender once that it is degraded, not
// again for the redeliveries and a second message within five minutes;
// once Redis answers again the redelivered messages are answered, each
// once.
func TestClusterRedisDownNotice(t *testing.T) {
	t.Parallel()
	_, prefix := realRedis(t)
	px := newCutProxy(t, "127.0.0.1:6379")
	const token, secret = "4242:down-test-token", "down-webhook-secret"
	srv := telegramtest.New(token)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	user := models.User{ID: 77, FirstName: "Ada"}
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+`cluster:
  redis_url: redis://`+px.addr+`/0
  lease_ttl: 1s
  key_prefix: "`+prefix+`"
  secret: "test cluster secret, 32 bytes at least"
access:
  owners: ["telegram:77"]
adapters:
  web:
    enabled: false
  telegram:
    token: "`+token+`"
    api_url: `+srv.URL+`
    mode: webhook
    webhook_url: https://bot.example.invalid/hook
    webhook_secret: `+secret+`
`)
	s := startServe(t, dir, "-c", cfg, "--listen", freeListen(t))
	sum := sha256.Sum256([]byte("pibot telegram webhook path\x00" + secret))
	hook := s.url + "/telegram/" + hex.EncodeToString(sum[:16])
	var upd int64
	deliver := func(up models.Update) int {
		t.Helper()
		body, _ := json.Marshal(up)
		req, _ := http.NewRequest(http.MethodPost, hook, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	update := func(text string) models.Update {
		upd++
		return models.Update{ID: upd, Message: srv.UserMessage(77, user, text)}
	}
	said := func() string {
		var all []string
		for _, m := range srv.Messages(77) {
			all = append(all, m.Text)
		}
		return strings.Join(all, "\n")
	}
	waitSaid := func(want string, n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); strings.Count(said(), want) < n; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the chat never showed %q %d times; it shows:\n%s\nlog:\n%s", want, n, said(), s.stderr)
			}
		}
	}
	// The webhook answers 503 until the adapter runs (just after "ready").
	before := update("before")
	for deadline := time.Now().Add(20 * time.Second); deliver(before)/100 != 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("delivery with Redis up refused\n%s", s.stderr)
		}
	}
	waitSaid("You said: before", 1)

	px.cut()
	first, second := update("during one"), update("during two")
	for _, up := range []models.Update{first, first, second, first} {
		if code := deliver(up); code/100 == 2 {
			t.Fatalf("delivery with Redis down answered %d, want a non-2xx so Telegram retries", code)
		}
	}
	waitSaid("my storage is unavailable", 1)
	time.Sleep(300 * time.Millisecond) // a second notice or a run would show meanwhile
	if strings.Contains(said(), "You said: during") {
		t.Fatalf("a run started while Redis was unreachable:\n%s", said())
	}

	px.restore(t)
	for _, up := range []models.Update{first, second} {
		deadline := time.Now().Add(20 * time.Second)
		for code := deliver(up); code/100 != 2; code = deliver(up) {
			if time.Now().After(deadline) {
				t.Fatalf("redelivery after Redis came back answered %d\n%s", code, s.stderr)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitSaid("You said: during one", 1)
	waitSaid("You said: during two", 1)
	deliver(first) // a late redelivery is a duplicate
	time.Sleep(500 * time.Millisecond)
	for _, want := range []string{"delivers it to me again for a while", "You said: before", "You said: during one", "You said: during two"} {
		if n := strings.Count(said(), want); n != 1 {
			t.Errorf("%q shown %d times, want once; the chat:\n%s", want, n, said())
		}
	}
	if code := s.stop(t); code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, s.stderr)
	}
}
