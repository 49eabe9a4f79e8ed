package rediscluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// following runs top.Subscribe until the test ends and returns what it
// delivers.
func following(t *testing.T, top *rediscluster.Topic) <-chan string {
	t.Helper()
	got := make(chan string, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := top.Subscribe(ctx, func(p []byte) { got <- string(p) }); err != nil {
			t.Errorf("Subscribe: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait() // Subscribe returns once its context ends
	})
	return got
}

// heard publishes payload on from until got delivers it (the subscription
// may not be listening yet, or be reconnecting) or within passes; other
// payloads delivered meanwhile are skipped.
func heard(t *testing.T, from *rediscluster.Topic, got <-chan string, payload string, within time.Duration) {
	t.Helper()
	send := func() error { return from.Publish(t.Context(), []byte(payload)) }
	if !sendUntil(send, got, payload, within) {
		t.Fatalf("%q not delivered within %v", payload, within)
	}
}

// TestTopicDeliversInOrder: what one replica publishes reaches another's
// subscription, in order, and not a deployment's under another prefix.
func TestTopicDeliversInOrder(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, prefix, _ := b.Open(t, "s")
			other := rediscluster.NewTopic(rdb, rediscluster.Options{Prefix: prefix + "other:"}, "web:events")
			pub := rediscluster.NewTopic(rdb, rediscluster.Options{Prefix: prefix}, "web:events")
			sub := rediscluster.NewTopic(rdb, rediscluster.Options{Prefix: prefix}, "web:events")
			if pub.Channel() != prefix+"web:events" {
				t.Errorf("channel %q", pub.Channel())
			}
			got := following(t, sub)
			otherGot := following(t, other)
			heard(t, pub, got, "warm-up", 10*time.Second)
			heard(t, other, otherGot, "other warm-up", 10*time.Second)
			for i := range 50 {
				if err := pub.Publish(t.Context(), fmt.Appendf(nil, "%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			next := 0
			for next < 50 {
				select {
				case p := <-got:
					if p == "warm-up" {
						continue // a repeat of the warm-up's
					}
					if p != fmt.Sprint(next) {
						t.Fatalf("delivered %q, want %d", p, next)
					}
					next++
				case <-time.After(10 * time.Second):
					t.Fatalf("delivered %d of 50", next)
				}
			}
			// The other prefix's subscription got none of them: after its
			// warm-up, the next thing it hears is its own marker.
			if err := other.Publish(t.Context(), []byte("other marker")); err != nil {
				t.Fatal(err)
			}
			for p := ""; p != "other marker"; {
				select {
				case p = <-otherGot:
					if p != "other warm-up" && p != "other marker" {
						t.Fatalf("another prefix's topic delivered %q", p)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the other prefix's marker was not delivered")
				}
			}
		})
	}
}

// TestTopicSurvivesRedisRestart: after Redis restarts, Subscribe
// subscribes again by itself and deliveries resume.
func TestTopicSurvivesRedisRestart(t *testing.T) {
	srv := redistest.PrivateServer(t)
	top := rediscluster.NewTopic(client(t, srv.Addr), rediscluster.Options{}, "web:events")
	got := following(t, top)
	heard(t, top, got, "before", 10*time.Second)
	srv.Restart(t)
	heard(t, top, got, "after", 10*time.Second)
}
