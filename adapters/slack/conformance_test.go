package slack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pibot/pibot/adapters/slack/slacktest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
)

// The adapter passes the chat conformance suite against the fake Slack: in
// a DM's main line (post and update) and in a channel thread (native,
// append-only streams with a recipient).
func TestConformance(t *testing.T) {
	for _, where := range []string{"dm", "channel-thread"} {
		t.Run(where, func(t *testing.T) {
			adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
				h := newHarness(t, "")
				conv := dm()
				if where == "channel-thread" {
					ts, _ := h.srv.Post(slacktest.Say{Channel: "C100", User: "U1", Text: "<@UBOT> start"})
					conv = chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C100", Thread: ts}
				}
				return adaptertest.Target{
					Adapter:    h.a,
					Conv:       conv,
					User:       "U1",
					Transcript: func(c chat.ConvRef) string { return transcript(h.srv, c) },
					InPlace:    true,
					Press: func(_ context.Context, ref chat.MsgRef, _ int, id string) error {
						payload, ok := h.srv.Press(ref.Conv.Channel, ref.ID, "U1", id)
						if !ok {
							return errors.New("no such button")
						}
						h.srv.Deliver("interactive", payload)
						return nil
					},
					Replica: h.adapter(t, ""),
					RateLimit: func(d time.Duration) {
						h.srv.Fail("chat.update", 1, slacktest.Fault{Kind: slacktest.Fault429, RetryAfter: int(d / time.Second)})
					},
					Deliver: func(ctx context.Context, ev adaptertest.Event) (adaptertest.Delivered, error) {
						waitFor(t, "the adapter's identity", func() bool { return h.a.rd.identity().userID != "" })
						if err := h.srv.WaitConnected(1, 10*time.Second); err != nil {
							return adaptertest.Delivered{}, err
						}
						return deliverSlack(h.srv, ev), nil
					},
				}
			})
		})
	}
}

// deliverSlack has U1 do ev over Socket Mode: in a DM, in the channel C100
// (a mention is <@UBOT>, and Slack sends its app_mention twin too), in a
// thread there, or as the slash command /pi. An envelope left
// unacknowledged comes again on the next connection: Again sends it again.
func deliverSlack(srv *slacktest.Server, ev adaptertest.Event) adaptertest.Delivered {
	channel := chat.ConvRef{Platform: platform, Workspace: "T0001", Channel: "C100"}
	var say slacktest.Say
	var d adaptertest.Delivered
	switch ev.Kind {
	case adaptertest.EventDM:
		say, d.Conv = slacktest.Say{Channel: "D100", User: "U1", Text: ev.Text}, dm()
	case adaptertest.EventMention:
		say, d.Conv = slacktest.Say{Channel: "C100", User: "U1", Text: "<@UBOT> " + ev.Text}, channel
	case adaptertest.EventGroup:
		say, d.Conv = slacktest.Say{Channel: "C100", User: "U1", Text: ev.Text}, channel
	case adaptertest.EventThreadReply:
		top, _ := srv.Post(slacktest.Say{Channel: "C100", User: "U1", Text: "<@UBOT> start"})
		say, d.Conv = slacktest.Say{Channel: "C100", User: "U1", Text: ev.Text, ThreadTS: top}, channel
		d.Conv.Thread = top
	case adaptertest.EventCommand:
		payload := slacktest.SlashJSON(srv.SlashCommand("D100", "U1", "/pi", ev.Text))
		send := func(context.Context) error { srv.Deliver("slash_commands", payload); return nil }
		_ = send(context.Background())
		return adaptertest.Delivered{Conv: dm(), Again: send}
	}
	_, bodies := srv.Post(say)
	d.Again = func(context.Context) error {
		for _, b := range bodies {
			srv.Deliver("events_api", b)
		}
		return nil
	}
	_ = d.Again(context.Background())
	return d
}
