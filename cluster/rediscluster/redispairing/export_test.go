package redispairing

import "time"

// SetClock makes p read the time from now (tests).
func (p *Pairings) SetClock(now func() time.Time) { p.now = now }
