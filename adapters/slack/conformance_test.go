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
				}
			})
		})
	}
}
