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
