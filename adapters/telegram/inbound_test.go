package telegram

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/secret"
)

func TestNewValidates(t *testing.T) {
	tok := secret.New(testToken)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing token", Config{}, "adapters.telegram.token"},
		{"malformed token", Config{Token: secret.New("nocolon")}, "adapters.telegram.token"},
		{"bad mode", Config{Token: tok, Mode: "push"}, "adapters.telegram.mode"},
		{"bad api url", Config{Token: tok, APIURL: "ftp://x"}, "adapters.telegram.api_url"},
		{"webhook without url", Config{Token: tok, Mode: ModeWebhook}, "adapters.telegram.webhook_url"},
		{"bad webhook secret", Config{Token: tok, Mode: ModeWebhook, WebhookURL: "https://x.example", WebhookSecret: secret.New("no spaces allowed")}, "adapters.telegram.webhook_secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: err = %v, want one naming %s", err, tt.want)
			}
			assertNoToken(t, err)
		})
	}
	if _, err := New(Config{Token: tok}); err != nil {
		t.Fatalf("valid config: %v", err)
	}
}

func TestPollingConfirmsOnlyAfterSink(t *testing.T) {
	h := newHarness(t, nil)
	var fails atomic.Int32
	fails.Store(2)
	in := h.run(t, func(in chat.Inbound) error {
		if in.Text == "first" && fails.Add(-1) >= 0 {
			return errors.New("disk full")
		}
		return nil
	})
	h.srv.AddText(42, alice, "first")
	h.srv.AddText(42, alice, "second")
	if got := next(t, in); got.Text != "first" || got.Conv.Channel != "42" || !got.Conv.DM || got.DedupKey == "" {
		t.Fatalf("first event = %+v", got)
	}
	if got := next(t, in); got.Text != "second" {
		t.Fatalf("second event = %+v", got)
	}
	waitFor(t, func() bool { return h.srv.Pending() == 0 })
	// The sink refused "first" twice: three getUpdates calls asked for it.
	var offsets []string
	for _, c := range h.srv.Calls("getUpdates") {
		offsets = append(offsets, c.Params["offset"])
	}
	n := 0
	for _, o := range offsets {
		if o == "" || o == "0" {
			n++
		}
	}
	if n < 3 {
		t.Errorf("getUpdates offsets = %v; want the unconfirmed update fetched again after each sink error", offsets)
	}
	if !strings.Contains(h.logs.String(), "fetched again") {
		t.Errorf("sink failures not logged:\n%s", h.logs)
	}
}

func TestPollingConflictBacksOff(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.SetConflict(true)
	h.run(t, nil)
	h.ready(t)
	time.Sleep(1500 * time.Millisecond)
	n := len(h.srv.Calls("getUpdates"))
	// Back-off 200 ms, 400 ms, 800 ms…: at most 4 polls in 1.5 s, where a
	// hot loop would make hundreds.
	if n < 1 || n > 4 {
		t.Fatalf("%d getUpdates calls in 1.5 s under 409", n)
	}
	if !strings.Contains(h.logs.String(), "409 Conflict") || !strings.Contains(h.logs.String(), "misconfiguration") {
		t.Errorf("conflict not logged as a misconfiguration:\n%s", h.logs)
	}
	h.srv.SetConflict(false)
	h.srv.AddText(42, alice, "after")
	waitFor(t, func() bool { return h.srv.Pending() == 0 })
}

func TestInboundNormalisation(t *testing.T) {
	h := newHarness(t, nil)
	in := h.run(t, nil)
	h.ready(t)
	const group, forum, super = int64(-555), int64(-1001234567890), int64(-1009999999999)
	h.srv.AddChat(models.Chat{ID: forum, Type: models.ChatTypeSupergroup, Title: "forum", IsForum: true})
	h.srv.AddChat(models.Chat{ID: super, Type: models.ChatTypeSupergroup, Title: "plain"})
	botMsg, err := h.a.Send(t.Context(), dm(group), chat.Out{Markdown: "I am the bot"})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("command in a DM", func(t *testing.T) {
		h.srv.AddText(42, alice, "/help me")
		got := next(t, in)
		if got.Command == nil || got.Command.Name != "help" || got.Command.Args != "me" || !got.Mentioned || got.User.ID != "42" {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("command addressed to the bot in a group", func(t *testing.T) {
		h.srv.AddText(group, alice, "/Ask@PIBOT_test_bot what now")
		got := next(t, in)
		if got.Command == nil || got.Command.Name != "ask" || got.Command.Args != "what now" || !got.Mentioned || got.Conv.DM {
			t.Fatalf("got %+v / %+v", got, got.Command)
		}
	})
	t.Run("command for another bot is skipped", func(t *testing.T) {
		h.srv.AddText(group, alice, "/ask@otherbot hi")
		h.srv.AddText(group, alice, "plain chatter")
		got := next(t, in)
		if got.Text != "plain chatter" || got.Mentioned || got.Command != nil {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("mention is stripped", func(t *testing.T) {
		h.srv.AddText(group, alice, "hey @pibot_test_bot what is up")
		got := next(t, in)
		if got.Text != "hey what is up" || !got.Mentioned {
			t.Fatalf("got %q mentioned=%v", got.Text, got.Mentioned)
		}
		h.srv.AddText(group, alice, "ask @pibot_test_bot2 instead")
		if got := next(t, in); got.Mentioned || got.Text != "ask @pibot_test_bot2 instead" {
			t.Fatalf("a longer name counted as a mention: %+v", got)
		}
	})
	t.Run("reply to the bot", func(t *testing.T) {
		m := h.srv.UserMessage(group, alice, "and then?")
		m.ReplyToMessage = h.srv.BotMessage(group, mustAtoi(t, botMsg.ID))
		h.srv.AddMessage(m)
		got := next(t, in)
		if got.ReplyTo == nil || got.ReplyTo.ID != botMsg.ID || !got.ReplyToBot || !got.Mentioned {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("forum topic", func(t *testing.T) {
		m := h.srv.UserMessage(forum, alice, "in a topic")
		m.MessageThreadID, m.IsTopicMessage = 7, true
		m.ReplyToMessage = &models.Message{ID: 7, Chat: m.Chat}
		h.srv.AddMessage(m)
		got := next(t, in)
		if got.Conv.Thread != "7" || got.ReplyTo != nil {
			t.Fatalf("got conv %+v reply %+v", got.Conv, got.ReplyTo)
		}
		if _, err := h.a.Send(t.Context(), got.Conv, chat.Out{Markdown: "answer"}); err != nil {
			t.Fatal(err)
		}
		if msgs := h.srv.Messages(forum); len(msgs) != 1 || msgs[0].ThreadID != 7 {
			t.Fatalf("reply not in topic 7: %+v", msgs)
		}
	})
	t.Run("thread id of a non-forum reply is not echoed", func(t *testing.T) {
		m := h.srv.UserMessage(super, alice, "@pibot_test_bot hi")
		m.MessageThreadID = 3
		h.srv.AddMessage(m)
		got := next(t, in)
		if got.Conv.Thread != "" {
			t.Fatalf("thread = %q", got.Conv.Thread)
		}
	})
	t.Run("photo with caption", func(t *testing.T) {
		m := h.srv.UserMessage(42, alice, "")
		m.Caption = "look"
		m.Photo = []models.PhotoSize{{FileID: "small", FileSize: 10}, {FileID: "big", FileSize: 1000}}
		h.srv.AddMessage(m)
		got := next(t, in)
		if got.Text != "look" || len(got.Files) != 1 || got.Files[0].ID != "big" || got.Files[0].Kind != "photo" {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("voice note", func(t *testing.T) {
		m := h.srv.UserMessage(42, alice, "")
		m.Voice = &models.Voice{FileID: "v1", MimeType: "audio/ogg", FileSize: 99}
		h.srv.AddMessage(m)
		if got := next(t, in); len(got.Files) != 1 || got.Files[0].Kind != "voice" {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("migration", func(t *testing.T) {
		h.srv.AddChat(models.Chat{ID: group, Type: models.ChatTypeGroup})
		m := h.srv.UserMessage(group, alice, "")
		m.MigrateToChatID = -1007777
		h.srv.AddMessage(m)
		got := next(t, in)
		want := chat.Move{From: chat.ConvRef{Platform: platform, Channel: itoa(group)}, To: chat.ConvRef{Platform: platform, Channel: "-1007777"}}
		if got.Kind != chat.KindMoved || got.Moved == nil || *got.Moved != want || got.Command != nil {
			t.Fatalf("got %+v", got)
		}
		// The service message in the new supergroup reports the same move.
		h.srv.AddChat(models.Chat{ID: -1007777, Type: models.ChatTypeSupergroup})
		m = h.srv.UserMessage(-1007777, alice, "")
		m.MigrateFromChatID = group
		h.srv.AddMessage(m)
		if got := next(t, in); got.Kind != chat.KindMoved || got.Moved == nil || *got.Moved != want {
			t.Fatalf("got %+v", got)
		}
	})
	// What a user types is a message, never a move, whatever it says.
	t.Run("typed migration is text", func(t *testing.T) {
		for _, text := range []string{"/__migrate -1009999", "/__migrate@pibot_test_bot 42"} {
			h.srv.AddText(group, alice, text)
			got := next(t, in)
			if got.Kind != chat.KindMessage || got.Moved != nil {
				t.Fatalf("%q became %+v", text, got)
			}
		}
	})
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}

func TestStripMention(t *testing.T) {
	tests := []struct {
		in, want string
		found    bool
	}{
		{"@bot hi", "hi", true},
		{"hi @Bot", "hi", true},
		{"hi @bot there", "hi there", true},
		{"/cmd@bot args", "/cmd args", true},
		{"mail a@botty.com", "mail a@botty.com", false},
		{"line one\n@bot\ncode  kept", "line one\n\ncode  kept", true},
	}
	for _, tt := range tests {
		got, found := stripMention(tt.in, "bot")
		if got != tt.want || found != tt.found {
			t.Errorf("stripMention(%q) = %q, %v; want %q, %v", tt.in, got, found, tt.want, tt.found)
		}
	}
}
