package rediscluster

import "time"

// SetClock makes b read the time from now instead of the Redis server (tests).
func (b *Budget) SetClock(now func() time.Time) { b.now = now }

// SetClock makes r read the time from now instead of the Redis server (tests).
func (r *Rates) SetClock(now func() time.Time) { r.now = now }

// LockKey returns the Redis key of key's lease (tests).
func (l *Locker) LockKey(key string) string {
	k, _ := l.keys(key)
	return k
}

// RenewOnce sends one renewal now (benchmarks).
func (le *Lease) RenewOnce() (bool, error) { return le.renewOnce() }

// InHand returns how many items of key this process has in hand (given).
func (ib *Inbox) InHand(key string) int { return ib.takes.given.inHand(key) }

// MaxPeeked is how many keys one round trip of Takeable looks at (tests).
const MaxPeeked = maxPeeked
