package rediscluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// watchRetry is how long Watch waits before it subscribes again after
// its subscription failed (Redis down, the connection dropped).
const watchRetry = time.Second

// watchIdle is how long a subscription may stay silent before Watch pings
// Redis on it; a ping that gets no answer within another watchIdle ends
// the subscription (the connection is dead without having said so) and
// Watch subscribes again.
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
	for {
		ib.listen(ctx, kick)
		t := time.NewTimer(watchRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// listen subscribes to the notices and passes them on until ctx ends or
// the subscription fails or goes silent.
func (ib *Inbox) listen(ctx context.Context, kick func(key string)) {
	ps := ib.rdb.Subscribe(ctx, ib.channel())
	defer ps.Close()
	// A receive does not end with ctx: closing the subscription ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, watchIdle)
		if ctx.Err() != nil {
			return
		}
		var ne net.Error
		switch {
		case err != nil && errors.As(err, &ne) && ne.Timeout() && !pinged:
			pinged = true
			if ps.Ping(ctx) != nil {
				return
			}
			continue
		case err != nil:
			return
		}
		pinged = false
		m, ok := msg.(*redis.Message)
		if !ok {
			continue // the subscription's confirmation, a pong
		}
		by, key, ok := strings.Cut(m.Payload, " ")
		if !ok || by == ib.consumer {
			continue // this process kicks itself when it enqueues
		}
		kick(key)
	}
}
