package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/pibot/pibot/cluster/rediscluster"
)

// TestDataLostRechecksTheLeases: the inbox's report that Redis lost its
// data has the locker's leases checked at once (Locker.Recheck, set once
// the locker exists), and /readyz tells of the loss; a report that comes
// before the locker exists only counts.
func TestDataLostRechecksTheLeases(t *testing.T) {
	e := newClusterEvents(slog.New(slog.DiscardHandler))
	var opts rediscluster.Options
	e.options(&opts)
	opts.OnDataLost() // before the locker: nothing to recheck
	rechecked := 0
	e.setRecheck(func() { rechecked++ })
	opts.OnDataLost()
	if rechecked != 1 {
		t.Fatalf("the leases were rechecked %d times after one loss with a locker, want 1", rechecked)
	}
	if note := e.readyNote(); !strings.Contains(note, "redis lost its data") {
		t.Fatalf("readyNote = %q", note)
	}
}
