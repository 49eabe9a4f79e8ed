package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
)

// sharedNoticeEvery is the least time between two "shared store
// unreachable" notices in one conversation: a platform that redelivers
// the message every few seconds while Redis is down would repeat them.
const sharedNoticeEvery = 5 * time.Minute

// The notices a sender gets while the store the replicas share (Redis)
// does not answer, by what the platform does with a message pibot did not
// take (chat.Caps.Redelivery): each says only what is true there.
const (
	// sharedDownRedelivered: Telegram and Slack deliver the message again
	// for a while.
	sharedDownRedelivered = "⚠️ I can't take messages right now: my storage is unavailable. Your message is not lost yet: your chat app delivers it to me again for a while, and I answer it once storage is back. If you get no answer within a few minutes, please send it again."
	// sharedDownLost: the platform does not deliver it again (Discord, a
	// slash command or a button press anywhere).
	sharedDownLost = "⚠️ I can't take messages right now: my storage is unavailable, so I did not take this message. Please send it again in a few minutes."
)

// sharedDownText is the notice for in on a platform that does redeliver
// as r says; "" when the adapter shows the refusal itself.
func sharedDownText(r chat.Redelivery, in chat.Inbound) string {
	switch {
	case r == chat.ShowsRefusal:
		return ""
	case r == chat.Redelivers && in.Interaction == nil:
		return sharedDownRedelivered
	default:
		// A slash command or an interaction is answered or fails at
		// once on every platform: it is not delivered again.
		return sharedDownLost
	}
}

// degraded tells the senders of a cluster replica whose shared store
// (Redis) is unreachable that their message was not taken: once per
// conversation per sharedNoticeEvery, in words that are true for their
// platform (sharedDownText). The message itself is refused (the webhook
// answers non-2xx, a poller does not advance, the web chat shows Retry).
type degraded struct {
	reply func(ctx context.Context, in chat.Inbound, md string)
	// redelivery is what in's platform does with a refused event
	// (chat.Caps.Redelivery).
	redelivery func(in chat.Inbound) chat.Redelivery
	now        func() time.Time

	mu   sync.Mutex
	told map[string]time.Time // conversation -> last notice
}

// sharedDown sends in's conversation the notice unless it got one within
// sharedNoticeEvery. Only chat messages are answered (not presses or
// platform events). The notice needs no Redis: the adapters pace it in
// the process while the shared pacing is unreachable.
func (d *degraded) sharedDown(ctx context.Context, in chat.Inbound) {
	if d == nil || in.Kind != chat.KindMessage {
		return
	}
	md := sharedDownText(d.redelivery(in), in)
	if md == "" {
		return
	}
	key, now := in.Conv.Key(), d.now()
	d.mu.Lock()
	if d.told == nil {
		d.told = map[string]time.Time{}
	}
	last, seen := d.told[key]
	tell := !seen || now.Sub(last) >= sharedNoticeEvery
	if tell {
		d.told[key] = now
	}
	// Forget conversations told long ago, so the map stays small.
	for k, at := range d.told {
		if now.Sub(at) >= sharedNoticeEvery {
			delete(d.told, k)
		}
	}
	d.mu.Unlock()
	if tell {
		d.reply(ctx, in, md)
	}
}
