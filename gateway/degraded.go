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

// sharedDownText is the notice a sender gets while the store the replicas
// share (Redis) does not answer.
const sharedDownText = "⚠️ I am degraded: the store my replicas share does not answer, so I could not take this message yet. Nothing is lost: your chat app delivers it again and it is answered once the store is back (if you get no answer within a few minutes, send it again)."

// degraded tells the senders of a cluster replica whose shared store
// (Redis) is unreachable that their message waits: once per conversation
// per sharedNoticeEvery. The message itself is refused (the webhook
// answers non-2xx, a poller does not advance), so the platform delivers
// it again and it is taken once Redis answers.
type degraded struct {
	reply func(ctx context.Context, in chat.Inbound, md string)
	now   func() time.Time

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
		d.reply(ctx, in, sharedDownText)
	}
}
