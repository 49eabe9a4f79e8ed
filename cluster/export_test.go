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

// WaitCompaction returns once a compaction of ib's file in progress
// (started by an Ack) has ended (tests).
func (ib *LocalInbox) WaitCompaction() { ib.log.bg.wg.Wait() }

// OnCompactStep has f told each step of ib's compactions' replacement
// of the file, synchronously, on the compaction's goroutine, as the step
// is reached (tests: a crash there). StepPartial is reached with no lock
// held: f may use ib there (records written while the compaction writes
// its new file); the later steps come under the inbox's lock, where it
// must not. Set it while no compaction runs.
func (ib *LocalInbox) OnCompactStep(f func(atomicfile.Step)) {
	ib.log.swap.Lock()
	defer ib.log.swap.Unlock()
	ib.log.onStep = f
}
