package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

// The Redis-down notice goes once per conversation per
// sharedNoticeEvery, only for chat messages, and the conversations told
// long ago are forgotten.
func TestSharedDownNoticeIsRateLimited(t *testing.T) {
	var mu sync.Mutex
	told := map[string]int{}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := &degraded{
		reply: func(_ context.Context, in chat.Inbound, md string) {
			if md != sharedDownRedelivered {
				t.Errorf("notice %q", md)
			}
			mu.Lock()
			told[in.Conv.Key()]++
			mu.Unlock()
		},
		redelivery: func(chat.Inbound) chat.Redelivery { return chat.Redelivers },
		now:        func() time.Time { return now },
	}
	msg := func(ch string) chat.Inbound {
		return chat.Inbound{Kind: chat.KindMessage, Conv: chat.ConvRef{Platform: "telegram", Channel: ch}}
	}
	steps := []struct {
		advance time.Duration
		in      chat.Inbound
		want    map[string]int
	}{
		{0, msg("1"), map[string]int{"telegram::1": 1}},
		{time.Second, msg("1"), map[string]int{"telegram::1": 1}},                   // a redelivery
		{time.Second, msg("2"), map[string]int{"telegram::1": 1, "telegram::2": 1}}, // another conversation
		{time.Second, chat.Inbound{Kind: chat.KindAction, Conv: msg("3").Conv}, map[string]int{"telegram::1": 1, "telegram::2": 1}},
		{sharedNoticeEvery - 4*time.Second, msg("1"), map[string]int{"telegram::1": 1, "telegram::2": 1}},
		{3 * time.Second, msg("1"), map[string]int{"telegram::1": 2, "telegram::2": 1}}, // five minutes on
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		d.sharedDown(t.Context(), s.in)
		mu.Lock()
		for k, n := range s.want {
			if told[k] != n {
				t.Errorf("step %d: %s told %d times, want %d", i, k, told[k], n)
			}
		}
		mu.Unlock()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.told["telegram::2"]; ok || len(d.told) != 1 {
		t.Errorf("told = %v: want the conversation told over five minutes ago forgotten", d.told)
	}
	var nilD *degraded
	nilD.sharedDown(t.Context(), msg("1")) // embedded mode: nothing
}

// The notice says what is true where the message was sent: a platform
// that delivers it again (Telegram, Slack events) is waited for; one that
// does not (Discord), or a command or press answered through an
// interaction, asks the sender to send it again; the web chat, which shows
// Retry beside the message, gets no notice. None carries error text.
func TestSharedDownTextPerPlatform(t *testing.T) {
	msg := chat.Inbound{Kind: chat.KindMessage}
	slash := chat.Inbound{Kind: chat.KindMessage, Interaction: &chat.Interaction{ID: "i"}}
	tests := []struct {
		name string
		r    chat.Redelivery
		in   chat.Inbound
		want string
	}{
		{"telegram or slack message", chat.Redelivers, msg, sharedDownRedelivered},
		{"slack slash command", chat.Redelivers, slash, sharedDownLost},
		{"discord message", chat.NoRedelivery, msg, sharedDownLost},
		{"web chat", chat.ShowsRefusal, msg, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sharedDownText(tt.r, tt.in); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if !strings.Contains(sharedDownRedelivered, "delivers it to me again") || strings.Contains(sharedDownLost, "delivers") {
		t.Errorf("the notices promise the wrong thing:\n%s\n%s", sharedDownRedelivered, sharedDownLost)
	}
}
