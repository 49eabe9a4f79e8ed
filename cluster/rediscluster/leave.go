package rediscluster

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/redis/go-redis/v9"
)

// leaveScript counts one cut attempt against each item of key ARGV[1]
// named in ARGV[2:] that consumer's touched set KEYS[3] still holds (its
// work began) and the stream KEYS[1] still has (crashes in the hash
// KEYS[2]), and takes them out of the touched set, so a crash of this
// process does not count them again. Run twice (go-redis retries after a
// lost answer), it counts nothing the second time.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var leaveScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('SREM', KEYS[3], id .. ' ' .. ARGV[1]) == 1 then
    if #redis.call('XRANGE', KEYS[1], id, id) > 0 then
      redis.call('HINCRBY', KEYS[2], id, 1)
      n = n + 1
    end
  end
end
return n
`)
})

// Leave tells the inbox that this process no longer handles the items of
// key it has in hand: the lease of their session was lost or released.
// They are forgotten (given), so they no longer cost memory once another
// replica ends them, and the next Claim of key by this process hands them
// over again, as it does another consumer's.
//
// With cut (the lease was lost: their runs were stopped unrecorded), each
// of them still pending whose work began (Begin) counts one crash, as
// when a process crashes while it executes an item: an item whose
// handling keeps stalling its replica past the lease is quarantined like
// one that keeps crashing it; those that only waited count nothing. They
// leave this consumer's touched set, so a later crash of this process
// does not count them again. A cut Leave that fails (Redis down, which is
// also why leases are lost) counts nothing: an outage is not the item's
// doing. Items a lost answer took were never in hand: they count nothing.
// Without cut, Leave makes no round trip.
func (ib *Inbox) Leave(ctx context.Context, key string, cut bool) (err error) {
	defer ib.loss.afterLeave(ctx, key, &err) // lost.go
	ids := ib.takes.given.forget(key)
	if !cut || len(ids) == 0 {
		return nil
	}
	return ib.crash.cut(ctx, key, ids)
}

// cut counts one crash against each item ids of key whose work began
// (leaveScript): Leave with cut.
func (c *crashCounter) cut(ctx context.Context, key string, ids []string) error {
	sort.Strings(ids) // a stable script argument list, for tests and logs
	args := make([]any, 0, 1+len(ids))
	args = append(args, key)
	for _, id := range ids {
		args = append(args, id)
	}
	err := leaveScript().Run(ctx, c.st.rdb, []string{c.st.stream(key), c.st.base + "c:" + key, c.st.touched()}, args...).Err()
	if err != nil {
		return fmt.Errorf("rediscluster: inbox leave: %w", err)
	}
	return nil
}
