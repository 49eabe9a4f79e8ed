package discord

import (
	"context"
	"errors"
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
			Deliver: func(ctx context.Context, ev adaptertest.Event) (adaptertest.Delivered, error) {
				select {
				case <-h.srv.Ready():
				case <-ctx.Done():
					return adaptertest.Delivered{}, ctx.Err()
				}
				return deliverDiscord(ctx, h, ev)
			},
		}
	})
}

// deliverDiscord has alice do ev over the gateway: in her DM, in a guild
// channel (a mention is <@bot>), in a thread the bot opened on a message
// of hers (Discord says the thread is the bot's: bound), or a typed
// command in the DM. Discord does not deliver a refused event again, but
// a resumed session replays the events it missed: Again dispatches it
// again.
func deliverDiscord(ctx context.Context, h *harness, ev adaptertest.Event) (adaptertest.Delivered, error) {
	var m *discordtest.Message
	mention := false
	d := adaptertest.Delivered{Conv: guildConv()}
	switch ev.Kind {
	case adaptertest.EventDM:
		m, d.Conv = h.srv.PostUser(dmID, alice, ev.Text, ""), dmConv()
	case adaptertest.EventCommand:
		m, d.Conv = h.srv.PostUser(dmID, alice, "/"+ev.Text, ""), dmConv()
	case adaptertest.EventMention:
		m, mention = h.srv.PostUser(chanID, alice, "<@"+h.srv.Bot.ID+"> "+ev.Text, ""), true
	case adaptertest.EventGroup:
		m = h.srv.PostUser(chanID, alice, ev.Text, "")
	case adaptertest.EventThreadReply:
		start := h.srv.PostUser(chanID, alice, "a question", "")
		conv, err := h.a.OpenThread(ctx, chat.MsgRef{Conv: guildConv(), ID: start.ID}, "a question")
		if err != nil {
			return d, err
		}
		m, d.Conv, d.Bound = h.srv.PostUser(start.ID, alice, ev.Text, ""), conv, true
	default:
		return d, errors.ErrUnsupported
	}
	h.srv.DispatchMessage(m, mention)
	d.Again = func(context.Context) error { h.srv.DispatchMessage(m, mention); return nil }
	return d, nil
}
