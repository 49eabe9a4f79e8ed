package access

import "time"

// SetClock makes s read the time from now (tests).
func (s *Store) SetClock(now func() time.Time) { s.now = now }
