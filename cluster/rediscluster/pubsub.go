package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// follow calls deliver, on follow's goroutine, with the payload of every
// message published on channel until ctx ends. A subscription that fails
// or goes silent is opened again after watchRetry. Messages published
// while no subscription is open are lost: pub/sub is not durable.
func follow(ctx context.Context, rdb redis.UniversalClient, channel string, deliver func(payload string)) {
	for {
		listen(ctx, rdb, channel, deliver)
		t := time.NewTimer(watchRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// listen subscribes to channel and passes its messages on until ctx ends
// or the subscription fails or goes silent.
func listen(ctx context.Context, rdb redis.UniversalClient, channel string, deliver func(payload string)) {
	ps := rdb.Subscribe(ctx, channel)
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
		if m, ok := msg.(*redis.Message); ok {
			deliver(m.Payload)
		}
		// Anything else is the subscription's confirmation or a pong.
	}
}

// Topic is a pub/sub channel the replicas share (cmd/pibot passes one to
// the web chat): what one replica publishes, every replica subscribed at
// that moment receives, itself included, in the order it was published.
// Delivery is at most once: what is published while a subscription is
// down (Redis restarted, the connection dropped) is lost to that
// subscriber.
//
// Payloads are sealed with the cluster secret (Options.Keys): one that
// does not open is reported (Options.OnForged) and not delivered.
type Topic struct {
	rdb     redis.UniversalClient
	channel string
	opts    Options
}

// NewTopic returns the topic name under opts' key prefix.
func NewTopic(rdb redis.UniversalClient, opts Options, name string) *Topic {
	return &Topic{rdb: rdb, channel: opts.KeyPrefix() + name, opts: opts}
}

// Channel returns the Redis channel the topic publishes on.
func (t *Topic) Channel() string { return t.channel }

// Publish sends payload to the topic's subscribers.
func (t *Topic) Publish(ctx context.Context, payload []byte) error {
	if err := t.rdb.Publish(ctx, t.channel, t.opts.Keys.Seal(t.channel, payload)).Err(); err != nil {
		return fmt.Errorf("rediscluster: publish: %w", err)
	}
	return nil
}

// Subscribe calls deliver, on Subscribe's goroutine, with every payload
// published on the topic until ctx ends; it then returns nil. It
// subscribes again by itself after a failure (see Topic for what is lost
// meanwhile). A deliver that blocks holds up the payloads after it.
func (t *Topic) Subscribe(ctx context.Context, deliver func(payload []byte)) error {
	follow(ctx, t.rdb, t.channel, func(p string) {
		plain, err := t.opts.Keys.Open(t.channel, p)
		if err != nil {
			t.opts.forged("topic", t.channel)
			return
		}
		deliver(plain)
	})
	return nil
}
