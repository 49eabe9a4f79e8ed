package discord

import (
	"context"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/discord/discordtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
)

// The adapter passes the chat conformance suite against the fake Discord,
// in a guild text channel (threads can hang off its messages).
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		h := newHarness(t, nil)
		return adaptertest.Target{
			Adapter: h.a,
			Conv:    guildConv(),
			User:    alice.ID,
			Transcript: func(c chat.ConvRef) string {
				ch, err := channelOf(c)
				if err != nil {
					t.Fatal(err)
				}
				return h.srv.Transcript(ch, alice.ID)
			},
			InPlace: true,
			Press: func(_ context.Context, ref chat.MsgRef, _ int, id string) error {
				h.srv.Press(ref.ID, alice, id)
				return nil
			},
			Replica: h.adapter(t, nil),
			RateLimit: func(d time.Duration) {
				h.srv.Fail("PATCH message", 1, discordtest.Fault{Kind: discordtest.Fault429, RetryAfter: d})
			},
		}
	})
}
