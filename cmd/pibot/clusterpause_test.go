package main

import (
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/adapters/telegram/telegramtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/internal/secret"
)

// TestTelegram429PausesEveryReplica: two replicas' Telegram adapters on
// the rates cluster mode wires (real Redis). The fake Bot API answers one
// replica's send with a 429 and retry_after 2; the other replica's send to
// another chat, made right after, waits out that window too, and no call
// reaches the fake before its retry_after expired.
func TestTelegram429PausesEveryReplica(t *testing.T) {
	t.Parallel()
	rdb, prefix := realRedis(t)
	const token = "123456789:AAtest-token-of-the-pause"
	srv := telegramtest.New(token)
	t.Cleanup(srv.Close)
	rep := &replicaState{rdb: rdb, opts: rediscluster.Options{Prefix: prefix}}
	var adapters []*telegram.Adapter
	for range 2 {
		a, err := telegram.New(telegram.Config{Token: secret.New(token), APIURL: srv.URL, Rates: rep.rates()})
		if err != nil {
			t.Fatal(err)
		}
		adapters = append(adapters, a)
	}
	srv.Fail("sendMessage", 1, telegramtest.Fault{Kind: telegramtest.Fault429, RetryAfter: 2})
	first := make(chan error, 1)
	go func() {
		_, err := adapters[0].Send(t.Context(), chat.ConvRef{Platform: "telegram", Channel: "42", DM: true}, chat.Out{Markdown: "one"})
		first <- err
	}()
	var refused time.Time
	waitUntil(t, func() bool {
		for _, c := range srv.Calls("sendMessage") {
			if c.Code == 429 {
				refused = c.Time
				return true
			}
		}
		return false
	})
	// The pause is set in Redis right after the 429 is read.
	waitUntil(t, func() bool {
		n, err := rdb.Exists(t.Context(), prefix+"rate:{telegram/123456789}/bot:pause").Result()
		return err == nil && n == 1
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := adapters[1].Send(t.Context(), chat.ConvRef{Platform: "telegram", Channel: "43", DM: true}, chat.Out{Markdown: "two"}); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatalf("the refused send was not retried after the pause: %v", err)
	}
	for _, c := range srv.Calls("sendMessage") {
		if c.Code == 200 && c.Time.Before(refused.Add(2*time.Second-50*time.Millisecond)) {
			t.Errorf("a send to chat %s went out %v after the 429, inside its 2s retry_after", c.Params["chat_id"], c.Time.Sub(refused))
		}
	}
	if v := srv.Violations(); len(v) > 0 {
		t.Errorf("calls inside a retry_after window: %v", v)
	}
	if len(srv.Messages(42)) != 1 || len(srv.Messages(43)) != 1 {
		t.Errorf("messages: chat 42 %d, chat 43 %d; want one each", len(srv.Messages(42)), len(srv.Messages(43)))
	}
}

// TestTelegramCallCostsOneRoundTrip: in cluster mode a paced Telegram
// call (a send) takes its chat's token and the bot's and checks the
// replicas' shared pause in one Redis round trip, and an unpaced one (a
// typing indicator) checks the pause in one. Before, a send cost three:
// the pause, then each bucket.
func TestTelegramCallCostsOneRoundTrip(t *testing.T) {
	rdb, prefix := realRedis(t)
	rt := &redistest.RoundTrips{}
	rdb.AddHook(rt)
	const token = "123456789:AAtest-token-of-the-trips"
	srv := telegramtest.New(token)
	t.Cleanup(srv.Close)
	rep := &replicaState{rdb: rdb, opts: rediscluster.Options{Prefix: prefix}}
	a, err := telegram.New(telegram.Config{Token: secret.New(token), APIURL: srv.URL, Rates: rep.rates()})
	if err != nil {
		t.Fatal(err)
	}
	conv := chat.ConvRef{Platform: "telegram", Channel: "42", DM: true}
	// The first call loads the script into Redis (EVALSHA, then EVAL).
	if _, err := a.Send(t.Context(), conv, chat.Out{Markdown: "warm"}); err != nil {
		t.Fatal(err)
	}
	n := rt.Count()
	if _, err := a.Send(t.Context(), conv, chat.Out{Markdown: "one"}); err != nil {
		t.Fatal(err)
	}
	if got := rt.Since(n); len(got) != 1 {
		t.Errorf("a send made %d Redis round trips (%v), want 1", len(got), got)
	}
	n = rt.Count()
	if err := a.SetStatus(t.Context(), conv, "thinking"); err != nil {
		t.Fatal(err)
	}
	if got := rt.Since(n); len(got) != 1 {
		t.Errorf("a typing indicator made %d Redis round trips (%v), want 1", len(got), got)
	}
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}
