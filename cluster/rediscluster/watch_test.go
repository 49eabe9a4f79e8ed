package rediscluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// watching runs ib.Watch until the test ends and returns the keys it
// kicks with.
func watching(t *testing.T, ib *rediscluster.Inbox) <-chan string {
	t.Helper()
	kicks := make(chan string, 64)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := ib.Watch(ctx, func(key string) { kicks <- key }); err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait() // Watch returns once its context ends
	})
	return kicks
}

// noticed enqueues for key on from until watcher's kicks name key (the
// subscription may not be listening yet, or be reconnecting) or within
// passes; other keys kicked meanwhile are skipped.
func noticed(t *testing.T, from *rediscluster.Inbox, kicks <-chan string, key string, within time.Duration) {
	t.Helper()
	send := func() error {
		_, _, err := from.Enqueue(t.Context(), key, []byte(`"x"`))
		return err
	}
	if !sendUntil(send, kicks, key, within) {
		t.Fatalf("no notice of an item enqueued for %q within %v", key, within)
	}
}

// sendUntil calls send until got yields want or within passes (a send that
// fails, Redis restarting, is tried again after a pause), and reports
// whether want came. Other values got yields meanwhile are skipped.
func sendUntil(send func() error, got <-chan string, want string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if err := send(); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		wait := time.After(100 * time.Millisecond)
	drain:
		for {
			select {
			case v := <-got:
				if v == want {
					return true
				}
			case <-wait:
				break drain
			}
		}
	}
	return false
}

// TestInboxWatchTellsOtherReplicas: a replica watching the inbox hears
// of every item another replica enqueues, with its key, and not of the
// items it enqueues itself (it kicks itself).
func TestInboxWatchTellsOtherReplicas(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			a := openInbox(t, b, "s", "replica-a")
			rb := openInbox(t, b, "s", "replica-b")
			kicks := watching(t, a)
			noticed(t, rb, kicks, "warm-up", 10*time.Second)
			ctx := t.Context()
			// One channel, in order: A's own notice would come first.
			if _, _, err := a.Enqueue(ctx, "mine", []byte(`"1"`)); err != nil {
				t.Fatal(err)
			}
			if _, _, err := rb.Enqueue(ctx, "theirs", []byte(`"2"`)); err != nil {
				t.Fatal(err)
			}
			for {
				select {
				case k := <-kicks:
					switch k {
					case "warm-up":
						continue // a repeat of the warm-up's
					case "theirs":
						return
					default:
						t.Fatalf("kicked with %q, want %q (a replica is not told of its own items)", k, "theirs")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no notice of the item replica B enqueued")
				}
			}
		})
	}
}

// TestInboxWatchSurvivesRedisRestart: after Redis restarts, Watch
// subscribes again by itself and the notices resume.
func TestInboxWatchSurvivesRedisRestart(t *testing.T) {
	srv := redistest.PrivateServer(t)
	open := func(replica string) *rediscluster.Inbox {
		ib, err := rediscluster.OpenInbox(t.Context(), client(t, srv.Addr), rediscluster.Options{}, replica)
		if err != nil {
			t.Fatal(err)
		}
		return ib
	}
	a, rb := open("replica-a"), open("replica-b")
	kicks := watching(t, a)
	noticed(t, rb, kicks, "before", 10*time.Second)
	srv.Restart(t)
	noticed(t, rb, kicks, "after", 10*time.Second)
}
