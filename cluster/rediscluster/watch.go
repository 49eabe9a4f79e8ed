package rediscluster

import (
	"context"
	"strings"
	"time"
)

// watchRetry is how long Watch (and Topic.Subscribe) waits before it
// subscribes again after its subscription failed (Redis down, the
// connection dropped).
const watchRetry = time.Second

// watchIdle is how long a subscription may stay silent before it pings
// Redis on it; a ping that gets no answer within another watchIdle ends
// the subscription (the connection is dead without having said so) and
// it subscribes again.
const watchIdle = 15 * time.Second

// Watch calls kick, on Watch's goroutine, with the key of every item
// another process enqueues, until ctx ends; it then returns nil. It is a
// push, so that the replica holding a session takes the items other
// replicas accepted for it at once instead of at its next poll.
//
// Notices are not durable: those published while the subscription is
// down (Redis restarted, the connection dropped) are lost, and the items
// they announced wait for the holder's poll. A lost notice costs latency,
// never an item. A kick that blocks holds up the notices after it.
func (ib *Inbox) Watch(ctx context.Context, kick func(key string)) error {
	follow(ctx, ib.st.rdb, ib.st.channel(), func(payload string) {
		by, key, ok := strings.Cut(payload, " ")
		if !ok || by == ib.st.consumer {
			return // this process kicks itself when it enqueues
		}
		kick(key)
	})
	return nil
}
