package chattest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
	"github.com/pibot/pibot/chat/chattest"
)

func target(ad *chattest.Adapter, a chat.Adapter) adaptertest.Target {
	return adaptertest.Target{
		Adapter:    a,
		Conv:       dm,
		User:       "1",
		Transcript: func(c chat.ConvRef) string { return strings.Join(ad.Messages(c), "\n") },
		InPlace:    true,
		Press: func(ctx context.Context, ref chat.MsgRef, _ int, id string) error {
			return ad.Inject(ctx, chat.Inbound{Kind: chat.KindAction, Conv: ref.Conv, Msg: ref,
				User: chat.User{ID: "1"}, Action: &chat.Action{Data: id, Msg: ref}, DedupKey: "press:" + id})
		},
		RateLimit: func(d time.Duration) { ad.FailNext(chattest.MethodEdit, 1, chattest.RateLimited(d)) },
	}
}

// The fake passes the suite every real adapter must pass.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		ad := chattest.New()
		return target(ad, ad)
	})
}

// With native, append-only streams.
func TestConformanceAppendOnly(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		caps := chat.Caps{Dialect: chat.DialectMarkdown, MaxLen: 4000, EditInterval: time.Second, NativeStream: true, AppendOnly: true}
		ad := chattest.New(chattest.WithCaps(caps, caps))
		return target(ad, ad.Streaming())
	})
}

// With threads opened by the bot (chat.ThreadOpener).
func TestConformanceThreads(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		ad := chattest.New()
		return target(ad, ad.Threads())
	})
}
