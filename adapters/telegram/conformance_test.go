package telegram

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

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
					Deliver: func(ctx context.Context, ev adaptertest.Event) (adaptertest.Delivered, error) {
						h.ready(t)
						return deliverTelegram(h, ev)
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

// deliverTelegram has alice do ev: in her private chat, in a group (a
// mention is the bot's @username), in a forum topic (Telegram's threads).
// An update the adapter did not confirm is fetched again by itself.
func deliverTelegram(h *harness, ev adaptertest.Event) (adaptertest.Delivered, error) {
	const group, forum = int64(-555), int64(-1001234567890)
	switch ev.Kind {
	case adaptertest.EventDM:
		h.srv.AddText(alice.ID, alice, ev.Text)
		return adaptertest.Delivered{Conv: dm(alice.ID)}, nil
	case adaptertest.EventCommand:
		h.srv.AddText(alice.ID, alice, "/"+ev.Text)
		return adaptertest.Delivered{Conv: dm(alice.ID)}, nil
	case adaptertest.EventMention:
		h.srv.AddText(group, alice, "@pibot_test_bot "+ev.Text)
		return adaptertest.Delivered{Conv: dm(group)}, nil
	case adaptertest.EventGroup:
		h.srv.AddText(group, alice, ev.Text)
		return adaptertest.Delivered{Conv: dm(group)}, nil
	case adaptertest.EventThreadReply:
		h.srv.AddChat(models.Chat{ID: forum, Type: models.ChatTypeSupergroup, Title: "forum", IsForum: true})
		m := h.srv.UserMessage(forum, alice, ev.Text)
		m.MessageThreadID, m.IsTopicMessage = 7, true
		m.ReplyToMessage = &models.Message{ID: 7, Chat: m.Chat}
		h.srv.AddMessage(m)
		conv := dm(forum)
		conv.Thread = "7"
		return adaptertest.Delivered{Conv: conv}, nil
	}
	return adaptertest.Delivered{}, errors.ErrUnsupported
}
