package cluster

import (
	"time"

	"github.com/pibot/pibot/internal/tokenbucket"
)

// SetClock makes d read the time from now (tests).
func (d *LocalDedupe) SetClock(now func() time.Time) { d.now = now }

// SetClock makes b read the time from now (tests).
func (b *LocalBudget) SetClock(now func() time.Time) { b.now = now }

// SetClock makes r read the time from now (tests).
func (r *Rates) SetClock(now func() time.Time) {
	r.Local = tokenbucket.NewLocalClock(rateMargin, now)
}

// SetCompactMin makes ib compact its file after n records (tests).
func (ib *LocalInbox) SetCompactMin(n int64) { ib.log.compactMin = n }

// WaitCompaction returns once a compaction of ib's file in progress
// (started by an Ack) has ended (tests).
func (ib *LocalInbox) WaitCompaction() { ib.log.bg.wg.Wait() }

// SetCompactHook makes every compaction of ib's file call hook while it
// writes the new file, no lock held (tests).
func (ib *LocalInbox) SetCompactHook(hook func()) { ib.log.compactHook = hook }
