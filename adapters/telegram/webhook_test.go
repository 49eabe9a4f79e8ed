package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// countingBody records whether the handler read the body.
type countingBody struct {
	r    io.Reader
	read atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.r.Read(p)
}

func (b *countingBody) Close() error { return nil }

func TestWebhook(t *testing.T) {
	const whSecret = "s3cret-Token_42"
	h := newHarness(t, func(c *Config) {
		c.Mode = ModeWebhook
		c.WebhookURL = "https://pibot.example/"
		c.WebhookSecret = secret.New(whSecret)
	})
	handler := h.a.WebhookHandler()
	path := h.a.WebhookPath()
	if !strings.HasPrefix(path, "/telegram/") || strings.Contains(path, whSecret) || len(path) < 30 {
		t.Fatalf("webhook path %q", path)
	}
	body, _ := json.Marshal(models.Update{ID: 900, Message: &models.Message{ID: 1, From: &alice, Chat: models.Chat{ID: 42, Type: models.ChatTypePrivate}, Text: "via webhook", Date: 1}})
	post := func(secretToken string) (*httptest.ResponseRecorder, *countingBody) {
		cb := &countingBody{r: strings.NewReader(string(body))}
		req := httptest.NewRequest(http.MethodPost, path, nil)
		req.Body = cb
		if secretToken != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secretToken)
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec, cb
	}

	if rec, _ := post(whSecret); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("before Run: %d, want 503", rec.Code)
	}
	var fail atomic.Bool
	fail.Store(true)
	in := h.run(t, func(chat.Inbound) error {
		if fail.Load() {
			return errors.New("inbox unavailable")
		}
		return nil
	})
	waitFor(t, func() bool { u, _ := h.srv.Webhook(); return u != "" })
	if u, s := h.srv.Webhook(); u != "https://pibot.example"+path || s != whSecret {
		t.Fatalf("setWebhook url=%q secret=%q", u, s)
	}
	for _, bad := range []string{"", "wrong", whSecret + "x"} {
		rec, cb := post(bad)
		if rec.Code != http.StatusForbidden || cb.read.Load() {
			t.Fatalf("secret %q: %d (body read: %v), want 403 before reading", bad, rec.Code, cb.read.Load())
		}
	}
	if rec, _ := post(whSecret); rec.Code != http.StatusInternalServerError {
		t.Fatalf("sink error: %d, want 500", rec.Code)
	}
	fail.Store(false)
	if rec, _ := post(whSecret); rec.Code != http.StatusOK {
		t.Fatalf("durable update: %d, want 200", rec.Code)
	}
	if got := next(t, in); got.Text != "via webhook" || got.DedupKey == "" {
		t.Fatalf("inbound = %+v", got)
	}
}

func TestRunRejectsWrongToken(t *testing.T) {
	srv := telegramtest.New("999:other")
	defer srv.Close()
	a, err := New(Config{Token: secret.New(testToken), APIURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Health(); err != nil {
		t.Fatalf("Health before Run: %v", err)
	}
	err = a.Run(t.Context(), func(context.Context, chat.Inbound) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "adapters.telegram.token") {
		t.Fatalf("Run: %v", err)
	}
	assertNoToken(t, err)
	// The refusal fails the health check (/readyz) for good.
	if h := a.Health(); h == nil || !strings.Contains(h.Error(), "adapters.telegram.token") {
		t.Fatalf("Health after a rejected token: %v", h)
	}
}

// leakyTransport fails every request with an error that quotes the URL,
// as many transports and proxies do.
type leakyTransport struct{}

func (leakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("dial %s: connection refused", r.URL)
}

func TestTokenNeverInErrorsOrLogs(t *testing.T) {
	var errs []error
	h := newHarness(t, func(c *Config) {
		c.HTTPClient = &http.Client{Transport: leakyTransport{}, Timeout: 2 * time.Second}
	})
	ctx := t.Context()
	conv := dm(42)
	_, err := h.a.Send(ctx, conv, chat.Out{Markdown: "x"})
	errs = append(errs, err)
	errs = append(errs, h.a.Edit(ctx, chat.MsgRef{Conv: conv, ID: "1"}, chat.Out{Markdown: "y"}))
	errs = append(errs, h.a.Download(ctx, chat.FileRef{ID: "f"}, io.Discard))
	errs = append(errs, h.a.RegisterCommands(ctx, []chat.CommandSpec{{Name: "x", Description: "y"}}))
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	errs = append(errs, h.a.Run(rctx, func(context.Context, chat.Inbound) error { return nil }))

	// A real server that drops connections and then vanishes.
	h2 := newHarness(t, nil)
	h2.srv.Fail("sendMessage", maxAttempts, telegramtest.Fault{Kind: telegramtest.FaultClose})
	_, err = h2.a.Send(ctx, conv, chat.Out{Markdown: "x"})
	errs = append(errs, err)
	id := h2.srv.AddFile("a.txt", []byte("a"), 0)
	h2.srv.Close()
	errs = append(errs, h2.a.Download(ctx, chat.FileRef{ID: id}, io.Discard))
	_, err = h2.a.Upload(ctx, conv, chat.OutFile{Name: "a.txt", Reader: strings.NewReader("a"), Size: 1}, nil)
	errs = append(errs, err)

	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			assertNoToken(t, err)
		}
	}
	if failed < len(errs)-1 { // Run returns nil when its context ends
		t.Fatalf("only %d of %d calls failed: %v", failed, len(errs), errs)
	}
	if !strings.Contains(h.logs.String(), "REDACTED") {
		t.Errorf("expected redacted URLs in the logs:\n%s", h.logs)
	}
}

// Until the Bot API answered getMe, Health says the adapter is starting;
// while getMe fails, Run keeps trying in the background and Health says
// why (so /readyz
// reports it rather than the start waiting on it); once getMe answers,
// Health is nil.
func TestHealthStartingWhileBotAPIUnreachable(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fail("getMe", 4*maxAttempts, telegramtest.Fault{Kind: telegramtest.Fault5xx})
	h.run(t, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := h.a.Health()
		if err != nil && !strings.Contains(err.Error(), "telegram: starting: waiting for the Bot API") {
			if !strings.Contains(err.Error(), "starting: the Bot API has not answered getMe yet") || strings.Contains(err.Error(), "telegram: telegram:") {
				t.Fatalf("Health while unreachable: %v", err)
			}
			assertNoToken(t, err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Health stayed nil while getMe failed; logs:\n%s", h.logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	for h.a.Health() != nil || !strings.Contains(h.logs.String(), "telegram: connected") {
		if time.Now().After(deadline) {
			t.Fatalf("Health after getMe answered: %v; logs:\n%s", h.a.Health(), h.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
