package slack

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

// harness is a fake Slack and an adapter pointed at it.
type harness struct {
	srv *slacktest.Server
	a   *Adapter
	log *strings.Builder

	mu  sync.Mutex
	got []chat.Inbound
	// fail makes the sink refuse deliveries while set.
	fail bool
}

// newHarness starts a fake Slack and an adapter in mode ("" for socket).
func newHarness(t *testing.T, mode string, opts ...slacktest.Option) *harness {
	t.Helper()
	srv := slacktest.New(opts...)
	t.Cleanup(srv.Close)
	h := &harness{srv: srv, log: &strings.Builder{}}
	h.a = h.adapter(t, mode)
	return h
}

// adapter builds another adapter on the harness's fake (a replica).
func (h *harness) adapter(t *testing.T, mode string) *Adapter {
	t.Helper()
	a, err := New(Config{BotToken: secret.New(h.srv.BotToken), AppToken: secret.New(h.srv.AppToken),
		SigningSecret: secret.New(h.srv.SigningSecret), Mode: mode, APIURL: h.srv.APIURL,
		Logger:       slog.New(slog.NewTextHandler(&lockedWriter{w: h.log}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		PingInterval: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a.calls.retryBase, a.recv.retryBase = 10*time.Millisecond, 10*time.Millisecond
	return a
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (h *harness) sink(_ context.Context, in chat.Inbound) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		return errSinkDown
	}
	h.got = append(h.got, in)
	return nil
}

var errSinkDown = errorString("sink down")

type errorString string

func (e errorString) Error() string { return string(e) }

// run runs the adapter until the test ends and waits for its identity.
func (h *harness) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.a.Run(ctx, h.sink) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Run did not return")
		}
	})
	waitFor(t, "the adapter's identity", func() bool { return h.a.rd.identity().userID != "" })
	if h.a.Mode() == ModeSocket {
		if err := h.srv.WaitConnected(1, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// inbound returns the events the sink took so far.
func (h *harness) inbound() []chat.Inbound {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chat.Inbound(nil), h.got...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dm() chat.ConvRef {
	return chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "D100", DM: true}
}

func transcript(srv *slacktest.Server, c chat.ConvRef) string {
	var texts []string
	for _, m := range srv.Messages(c.Channel) {
		if c.Thread == "" || m.ThreadTS == c.Thread || m.TS == c.Thread {
			texts = append(texts, m.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// slackCommand turns slash command form values into the SDK's type.
func slackCommand(v url.Values) slackapi.SlashCommand {
	return slackapi.SlashCommand{TeamID: v.Get("team_id"), ChannelID: v.Get("channel_id"), UserID: v.Get("user_id"),
		Command: v.Get("command"), Text: v.Get("text"), ResponseURL: v.Get("response_url"), TriggerID: v.Get("trigger_id")}
}
