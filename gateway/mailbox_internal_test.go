package gateway

import (
	"testing"
	"testing/synctest"
)

// TestMailboxTakeOver: an item that takes its goroutine over while nothing
// waits behind it lets the location take new work at once (which it would
// otherwise hold up as long as it runs), and wait no longer waits for it;
// behind waiting work, or once the item returned, takeOver takes nothing.
// (Without take-over, the first item would hold the location up until it
// returned.)
func TestMailboxTakeOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMailboxes()
		release := make(chan struct{})
		took := make(chan bool, 1)
		var late func() bool
		m.postTakeOver("a", func(take takeOver) {
			ok := take()
			took <- ok
			late = take
			<-release // runs on, like a run
		})
		if !<-took {
			t.Fatal("takeOver refused with nothing waiting")
		}
		ran := make(chan struct{})
		m.post("a", func() { close(ran) })
		synctest.Wait()
		select {
		case <-ran:
		default:
			t.Fatal("the location's next work waits for the item that took its goroutine over")
		}
		m.close()
		m.wait() // returns while the taken-over item still runs
		close(release)
		if !late() {
			t.Fatal("takeOver changed its answer")
		}

		// Behind waiting work: the item stays the mailbox's, and what
		// waits runs after it.
		m = newMailboxes()
		gate := make(chan struct{})
		var order []string
		m.postTakeOver("b", func(take takeOver) {
			<-gate
			if take() {
				t.Error("takeOver took the goroutine over with work waiting behind it")
			}
			order = append(order, "first")
		})
		var after func() bool
		m.postTakeOver("b", func(take takeOver) {
			order = append(order, "second")
			after = take
		})
		close(gate)
		m.close()
		m.wait()
		if len(order) != 2 || order[0] != "first" || order[1] != "second" {
			t.Fatalf("order %q, want first, second", order)
		}
		if after() {
			t.Fatal("takeOver called after its item returned took the goroutine over")
		}
	})
}
