package cluster

import (
	"time"

	"github.com/pibot/pibot/internal/atomicfile"
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

// OnCompactStep has f told each step of ib's compactions' replacement
// of the file, as the step is reached (tests: a crash there).
func (ib *LocalInbox) OnCompactStep(f func(atomicfile.Step)) {
	ib.log.swap.Lock()
	defer ib.log.swap.Unlock()
	ib.log.onStep = f
}
