package rediscluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
)

// ErrLeaseLost is the cause of a lease that Redis gave to someone else or
// forgot (its key is gone or holds another token).
var ErrLeaseLost = errors.New("rediscluster: lease lost")

// ErrLeaseExpired is the cause of a lease whose local deadline passed
// without a successful renewal (Redis unreachable, the process paused).
var ErrLeaseExpired = errors.New("rediscluster: lease expired without renewal")

// acquireScript grants KEYS[1] (the lease) when it is free, with a fence
// from KEYS[2] (the counter) that is above ARGV[3] (the highest fence the
// caller saw in the session file): a Redis that lost its counter never
// hands out an old fence. The lease holds "token:fence:holder" (ARGV[1],
// the fence, ARGV[4]) for ARGV[2] ms. It returns the fence, or 0 when the
// lease is held. A lease that already holds token ARGV[1] is this very
// call run again (the client retried after losing the answer): its fence
// is returned, nothing changes.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var acquireScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then
  local mine = ARGV[1] .. ':'
  if string.sub(v, 1, string.len(mine)) == mine then
    return tonumber(string.match(string.sub(v, string.len(mine) + 1), '^%d+'))
  end
  return 0
end
local f = redis.call('INCR', KEYS[2])
local m = tonumber(ARGV[3])
if f <= m then
  f = m + 1
  redis.call('SET', KEYS[2], string.format('%d', f))
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', f) .. ':' .. ARGV[4], 'PX', ARGV[2])
return f
`)
})

// renewScript extends KEYS[1] to ARGV[2] ms if it still holds ARGV[1].
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var renewScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)
})

// releaseScript deletes KEYS[1] if it still holds ARGV[1].
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var releaseScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)
})

// abandonScript deletes KEYS[1] if it holds a grant of token ARGV[1]
// (whatever its fence): an Acquire whose answer was lost.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var abandonScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. ':' then
  return redis.call('DEL', KEYS[1])
end
return 0
`)
})

// abandonTimeout bounds the clean-up of an Acquire whose answer was lost.
const abandonTimeout = 2 * time.Second

// Locker grants session leases with fencing tokens kept in Redis. A lease
// is renewed every TTL/3 by a goroutine the lease owns and is lost (its
// Done closes) when Redis says another holder has it or when its local
// deadline passes without a successful renewal. The local deadline runs on
// the monotonic clock from the moment the last successful renewal was
// sent, minus a fifth of the TTL, so the holder stops before Redis can
// grant the key to anyone else.
type Locker struct {
	rdb    redis.UniversalClient
	prefix string
	holder string
	ttl    time.Duration
	log    *slog.Logger
	stats  lockerStats

	mu   sync.Mutex
	live map[*Lease]struct{} // the leases held now, for Recheck
}

// LockerStats counts what a Locker's leases went through, for metrics.
type LockerStats struct {
	Granted     int64 // Acquire calls that got the lease
	Refused     int64 // Acquire calls that found it held
	Failed      int64 // Acquire calls that could not reach Redis
	Held        int64 // leases held now
	Lost        int64 // leases Redis gave to someone else or forgot
	Expired     int64 // leases whose deadline passed without renewal
	RenewErrors int64 // renewals that failed (and were retried)
}

type lockerStats struct {
	granted, refused, failed, held, lost, expired, renewErrors atomic.Int64
}

// Stats returns the counts so far.
func (l *Locker) Stats() LockerStats {
	s := &l.stats
	return LockerStats{
		Granted: s.granted.Load(), Refused: s.refused.Load(), Failed: s.failed.Load(), Held: s.held.Load(),
		Lost: s.lost.Load(), Expired: s.expired.Load(), RenewErrors: s.renewErrors.Load(),
	}
}

var _ cluster.Lease = (*Lease)(nil)

// NewLocker returns a locker on rdb. log may be nil. rdb should honour
// context deadlines (redis.Options.ContextTimeoutEnabled, as Dial sets),
// so that a renewal or a Release never waits past the lease deadline for
// an unreachable Redis; Done closes at the deadline either way.
func NewLocker(rdb redis.UniversalClient, opts Options, log *slog.Logger) *Locker {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ttl := max(opts.leaseTTL(), MinLeaseTTL)
	return &Locker{rdb: rdb, prefix: opts.KeyPrefix(), holder: opts.holder(), ttl: ttl, log: log}
}

// TTL returns the lease time to live.
func (l *Locker) TTL() time.Duration { return l.ttl }

// keys returns the lease key and the fence counter key of key. They share
// a hash tag, so the acquire script may touch both on a Redis Cluster.
func (l *Locker) keys(key string) (lease, fence string) {
	base := l.prefix + "{lease:" + key + "}"
	return base + ":lock", base + ":fence"
}

// Taken reports whether key's lease is held now, by any holder, in one
// round trip and without trying to take it: a replica asks it before it
// tries to take over a session that is likely held elsewhere.
func (l *Locker) Taken(ctx context.Context, key string) (bool, error) {
	lock, _ := l.keys(key)
	n, err := l.rdb.Exists(ctx, lock).Result()
	if err != nil {
		return false, fmt.Errorf("rediscluster: lease taken: %w", err)
	}
	return n > 0, nil
}

// Acquire grants key's lease or returns an error wrapping
// cluster.ErrLeaseHeld. minFence is the highest fence already seen in the
// session file; the grant's fence is above it.
func (l *Locker) Acquire(ctx context.Context, key string, minFence int64) (cluster.Lease, error) {
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	lk, fk := l.keys(key)
	sent := time.Now()
	f, err := acquireScript().Run(ctx, l.rdb, []string{lk, fk}, token, l.ttl.Milliseconds(), minFence, l.holder).Int64()
	if err != nil {
		// The grant may have happened without its answer reaching us:
		// free it rather than block the key for a TTL. A call that never
		// got a connection sent nothing.
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
			_ = abandonScript().Run(cctx, l.rdb, []string{lk}, token).Err()
			cancel()
		}
		l.stats.failed.Add(1)
		return nil, fmt.Errorf("rediscluster: acquire %s: %w", key, err)
	}
	if f == 0 {
		l.stats.refused.Add(1)
		return nil, fmt.Errorf("rediscluster: %s: %w", key, cluster.ErrLeaseHeld)
	}
	le := &Lease{
		l:        l,
		key:      key,
		lockKey:  lk,
		value:    token + ":" + strconv.FormatInt(f, 10) + ":" + l.holder,
		fence:    f,
		deadline: l.validUntil(sent),
		done:     make(chan struct{}),
		stop:     make(chan struct{}),
		exited:   make(chan struct{}),
		poke:     make(chan struct{}, 1),
	}
	l.mu.Lock()
	if l.live == nil {
		l.live = map[*Lease]struct{}{}
	}
	l.live[le] = struct{}{}
	l.mu.Unlock()
	l.stats.granted.Add(1)
	l.stats.held.Add(1)
	le.start()
	return le, nil
}

// Recheck has every lease held now renewed at once, instead of at its
// next renewal: Redis lost its data (the inbox saw its epoch mark gone),
// so their keys are likely gone, and another replica may take their
// sessions over as soon as it sees the loss too. A lease whose key is
// gone ends (ErrLeaseLost) a round trip later rather than up to a third
// of the TTL later, so its runs stop before the new holder's replay
// (issue 29).
func (l *Locker) Recheck() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for le := range l.live {
		select {
		case le.poke <- struct{}{}:
		default: // one is already due
		}
	}
}

// validUntil is the local deadline of a grant or renewal sent at sent.
func (l *Locker) validUntil(sent time.Time) time.Time {
	return sent.Add(l.ttl - l.ttl/5)
}

func newToken() (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("rediscluster: token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Lease is a Redis lease. Its renewal goroutine runs until the lease is
// released or lost; a timer, independent of any call in flight, closes
// Done when the local deadline passes.
type Lease struct {
	l       *Locker
	key     string
	lockKey string
	value   string // token:fence:holder, what the lease key holds
	fence   int64

	stop   chan struct{} // closed by Release
	exited chan struct{} // closed when the renewer returns
	poke   chan struct{} // Locker.Recheck: renew now
	once   sync.Once

	mu       sync.Mutex
	deadline time.Time   // monotonic
	expiry   *time.Timer // fires at deadline
	cause    error
	done     chan struct{}
}

// start arms the deadline timer and starts the renewals.
func (le *Lease) start() {
	le.mu.Lock()
	le.expiry = time.AfterFunc(time.Until(le.deadline), le.checkDeadline)
	le.mu.Unlock()
	go le.renew()
}

// checkDeadline ends the lease if its deadline has passed, or re-arms the
// timer for a deadline a renewal moved.
func (le *Lease) checkDeadline() {
	le.mu.Lock()
	left := time.Until(le.deadline)
	if left > 0 {
		le.expiry.Reset(left)
		le.mu.Unlock()
		return
	}
	le.mu.Unlock()
	if le.end(ErrLeaseExpired, &le.l.stats.expired) {
		le.l.log.Warn("lease expired without renewal", "key", le.key, "fence", le.fence)
	}
}

// Fence returns the fencing token of this grant.
func (le *Lease) Fence() int64 { return le.fence }

// Done is closed when the lease is lost or released.
func (le *Lease) Done() <-chan struct{} { return le.done }

// Deadline returns the local deadline: the lease may be taken by another
// holder after it. Callers check it before a side effect no fence can
// guard (a platform call).
func (le *Lease) Deadline() time.Time {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.deadline
}

// Err returns why Done is closed: ErrLeaseLost, ErrLeaseExpired, or
// context.Canceled after Release; nil while the lease is held.
func (le *Lease) Err() error {
	le.mu.Lock()
	defer le.mu.Unlock()
	return le.cause
}

// end closes Done with cause, stops the deadline timer and counts the
// end in Stats (held, and counted when not nil); it reports whether this
// call ended the lease. Done is closed last, so whoever it wakes reads
// Stats with this end counted (TestChaosRedisDown read Expired 0 after
// Done when the count came after the close).
func (le *Lease) end(cause error, counted *atomic.Int64) bool {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.cause != nil {
		return false
	}
	le.cause = cause
	le.expiry.Stop()
	le.l.mu.Lock()
	delete(le.l.live, le)
	le.l.mu.Unlock()
	le.l.stats.held.Add(-1)
	if counted != nil {
		counted.Add(1)
	}
	close(le.done)
	return true
}

// Release stops the renewals and deletes the lease key if it still holds
// this grant, so another holder may take it at once. It is safe to call
// more than once; only the first call talks to Redis.
func (le *Lease) Release(ctx context.Context) error {
	var err error
	le.once.Do(func() {
		close(le.stop)
		<-le.exited
		lost := errors.Is(le.Err(), ErrLeaseLost)
		le.end(context.Canceled, nil)
		if lost {
			return // the key is someone else's or gone
		}
		if e := releaseScript().Run(ctx, le.l.rdb, []string{le.lockKey}, le.value).Err(); e != nil {
			err = fmt.Errorf("rediscluster: release %s: %w", le.key, e)
		}
	})
	return err
}

// renew keeps the lease alive: every TTL/3 after a success, and every
// TTL/15 after a failure, until Release, a refusal or the deadline.
func (le *Lease) renew() {
	defer close(le.exited)
	ttl := le.l.ttl
	timer := time.NewTimer(ttl / 3)
	defer timer.Stop()
	for {
		select {
		case <-le.stop:
			return
		case <-le.done:
			return // expired
		case <-timer.C:
		case <-le.poke:
			timer.Stop() // Reset below (Go 1.23 timers keep no stale tick)
		}
		ok, err := le.renewOnce()
		next := ttl / 3
		switch {
		case err == nil && ok:
		case err == nil:
			if le.end(ErrLeaseLost, &le.l.stats.lost) {
				le.l.log.Warn("lease taken by another holder", "key", le.key, "fence", le.fence)
			}
			return
		case le.ending():
			return // released or expired while the renewal waited
		default:
			le.l.stats.renewErrors.Add(1)
			le.l.log.Warn("lease renewal failed; retrying until its deadline", "key", le.key, "err", err)
			next = ttl / 15
		}
		timer.Reset(next)
	}
}

// ending reports whether the lease is being released or has ended.
func (le *Lease) ending() bool {
	select {
	case <-le.stop:
		return true
	case <-le.done:
		return true
	default:
		return false
	}
}

// renewOnce sends one renewal, which must answer before the deadline. ok
// is false when Redis refused it (the lease is someone else's or gone).
func (le *Lease) renewOnce() (ok bool, err error) {
	ctx, cancel := context.WithDeadline(context.Background(), le.Deadline())
	defer cancel()
	// Stop waiting for Redis at once on Release or expiry.
	go func() {
		select {
		case <-le.stop:
		case <-le.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	sent := time.Now()
	n, err := renewScript().Run(ctx, le.l.rdb, []string{le.lockKey}, le.value, le.l.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	le.mu.Lock()
	if d := le.l.validUntil(sent); d.After(le.deadline) && le.cause == nil {
		le.deadline = d
	}
	le.mu.Unlock()
	return true, nil
}
