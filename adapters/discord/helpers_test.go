package discord

import (
	"bytes"
	"context"

	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

const (
	testToken = "MTIzNDU2Nzg5MDEyMzQ1Njc4.Gabcde.secret-part-of-the-token"
	guildID   = "800000000000000001"
	chanID    = "800000000000000002"
	dmID      = "800000000000000003"
	forumID   = "800000000000000004"
)

var (
	alice = discordtest.User{ID: "700000000000000001", Username: "alice"}
	bob   = discordtest.User{ID: "700000000000000002", Username: "bob"}
)

// harness is an adapter against a fresh fake Discord.
type harness struct {
	srv  *discordtest.Server
	a    *Adapter
	logs *syncBuffer
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newHarness(t *testing.T, mod func(*Config)) *harness {
	t.Helper()
	srv := discordtest.New(testToken)
	t.Cleanup(srv.Close)
	srv.AddChannel(chanID, guildID, discordtest.ChannelText)
	srv.AddChannel(dmID, "", discordtest.ChannelDM)
	srv.AddChannel(forumID, guildID, discordtest.ChannelForum)
	h := &harness{srv: srv, logs: &syncBuffer{}}
	h.a = h.adapter(t, mod)
	return h
}

// adapter builds another adapter on the same fake (as another replica).
func (h *harness) adapter(t *testing.T, mod func(*Config)) *Adapter {
	t.Helper()
	cfg := Config{Token: secret.New(testToken), APIURL: h.srv.URL, IdentifyBackoff: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run runs the adapter until the test ends; events arrive on the channel.
func (h *harness) run(t *testing.T) <-chan chat.Inbound {
	t.Helper()
	got := make(chan chat.Inbound, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- h.a.Run(ctx, func(_ context.Context, in chat.Inbound) error {
			got <- in
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
		case <-time.After(20 * time.Second):
			t.Error("Run did not return")
		}
	})
	select {
	case <-h.srv.Ready():
	case <-time.After(10 * time.Second):
		t.Fatalf("the adapter did not connect to the gateway; logs:\n%s", h.logs.String())
	}
	return got
}

func next(t *testing.T, got <-chan chat.Inbound) chat.Inbound {
	t.Helper()
	select {
	case in := <-got:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the sink")
		return chat.Inbound{}
	}
}

func nothing(t *testing.T, got <-chan chat.Inbound, d time.Duration) {
	t.Helper()
	select {
	case in := <-got:
		t.Fatalf("unexpected event %+v", in)
	case <-time.After(d):
	}
}

func guildConv() chat.ConvRef {
	return chat.ConvRef{Platform: platform, Workspace: guildID, Channel: chanID}
}

func dmConv() chat.ConvRef { return chat.ConvRef{Platform: platform, Channel: dmID, DM: true} }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type ctxType = context.Context

func secretOf(s string) secret.Secret { return secret.New(s) }
