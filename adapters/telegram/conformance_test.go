package telegram

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
	"github.com/pibot/pibot/internal/secret"
)

// The adapter passes the chat conformance suite against the fake Bot API,
// in a private chat (drafts) and in a group (edits only).
func TestConformance(t *testing.T) {
	for _, chatID := range []int64{42, -100} {
		t.Run(itoa(chatID), func(t *testing.T) {
			adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
				h := newHarness(t, nil)
				replica, err := New(Config{Token: secret.New(testToken), APIURL: h.srv.URL,
					Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				return adaptertest.Target{
					Adapter: h.a,
					Conv:    dm(chatID),
					User:    itoa(alice.ID),
					Transcript: func(c chat.ConvRef) string {
						var texts []string
						for _, m := range h.srv.Messages(mustParse(t, c.Channel)) {
							texts = append(texts, m.Text)
						}
						return strings.Join(texts, "\n")
					},
					InPlace: true,
					Press: func(ctx context.Context, ref chat.MsgRef, _ int, id string) error {
						h.srv.AddCallback(alice, chatID, mustAtoi(t, ref.ID), id)
						return nil
					},
					Replica: replica,
					RateLimit: func(d time.Duration) {
						h.srv.Fail("editMessageText", 1, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: int(d / time.Second)})
					},
				}
			})
		})
	}
}

func mustParse(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("chat id %q: %v", s, err)
	}
	return id
}
