package telegram

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

const testToken = "123456789:AAFakeSecretTokenForTests_xyz"

var alice = models.User{ID: 42, FirstName: "Alice", Username: "alice"}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type harness struct {
	a    *Adapter
	srv  *telegramtest.Server
	logs *syncBuffer
}

// newHarness starts a fake Bot API and an adapter pointed at it. At the end
// of the test it checks that no log line holds the token.
func newHarness(t *testing.T, mutate func(*Config), opts ...telegramtest.Option) *harness {
	t.Helper()
	srv := telegramtest.New(testToken, opts...)
	t.Cleanup(srv.Close)
	logs := &syncBuffer{}
	cfg := Config{
		Token:       secret.New(testToken),
		APIURL:      srv.URL,
		PollTimeout: time.Second,
		Logger:      slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.calls.retryBase = 20 * time.Millisecond
	a.poller.retryBase = 20 * time.Millisecond
	a.poller.conflictBase = 200 * time.Millisecond
	t.Cleanup(func() {
		if strings.Contains(logs.String(), testToken) || strings.Contains(logs.String(), strings.SplitN(testToken, ":", 2)[1]) {
			t.Errorf("the token leaked into the logs:\n%s", logs.String())
		}
		if testing.Verbose() {
			t.Log(logs.String())
		}
	})
	return &harness{a: a, srv: srv, logs: logs}
}

// run runs the adapter until the test ends; inbound events go to the
// returned channel, and sink decides what the sink returns (nil: nil).
func (h *harness) run(t *testing.T, sink func(chat.Inbound) error) <-chan chat.Inbound {
	t.Helper()
	ch := make(chan chat.Inbound, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.a.Run(ctx, func(_ context.Context, in chat.Inbound) error {
			if sink != nil {
				if err := sink(in); err != nil {
					return err
				}
			}
			ch <- in
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return ch
}

// ready waits until Run has learnt the bot's identity.
func (h *harness) ready(t *testing.T) {
	t.Helper()
	waitFor(t, func() bool { return h.a.reader.identity().username != "" })
}

func next(t *testing.T, ch <-chan chat.Inbound) chat.Inbound {
	t.Helper()
	select {
	case in := <-ch:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no inbound event")
	}
	return chat.Inbound{}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dm(id int64) chat.ConvRef {
	return chat.ConvRef{Platform: "telegram", Channel: itoa(id), DM: id > 0}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

// assertNoToken fails if err, or anything it wraps, mentions the token.
func assertNoToken(t *testing.T, err error) {
	t.Helper()
	secretPart := strings.SplitN(testToken, ":", 2)[1]
	var walk func(e error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if strings.Contains(e.Error(), secretPart) {
			t.Errorf("error leaks the token: %q", e.Error())
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
}
