package rediscluster

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
)

// The inbox keeps one Redis stream per key (a chat location) with one
// consumer group; every consumer is one process (an incarnation of a
// replica). All its keys share the hash tag {inbox}, so its scripts touch
// one slot:
//
//	P{inbox}:s:K      stream of K's pending items (fields d: data, n: order, by: enqueuer)
//	P{inbox}:c:K      hash item id -> crashes counted against it
//	P{inbox}:keys     sorted set: keys with pending items, scored by their oldest item
//	P{inbox}:seq      counter giving items their order across keys
//	P{inbox}:t:C      set "id key" of the items whose work consumer C began and did not end
//	P{inbox}:r:R      the current consumer of replica R and whether it stopped cleanly
//	P{inbox}:q        list of quarantined items (JSON)
//
// and one pub/sub channel, P{inbox}:enqueued, on which Enqueue tells every
// replica "consumer key" (Watch).

// The consumer group of every inbox stream is "pibot" (in the scripts).

// enqueueLua defines enqueue(stream, keys, seq, data, key, consumer),
// which appends one item to a stream (made with its consumer group if
// new), orders it and lists its key as pending, and returns its id;
// enqueueScript and admitScript share it.
const enqueueLua = `
local function enqueue(stream, keys, seq, data, key, consumer)
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, 'pibot', '0', 'MKSTREAM')
  end
  local n = redis.call('INCR', seq)
  local id = redis.call('XADD', stream, '*', 'd', data, 'n', n, 'by', consumer)
  redis.call('ZADD', keys, 'NX', n, key)
  return id
end
`

// enqueueScript: KEYS stream, keys, seq; ARGV data, key, consumer,
// notice channel. It tells the replicas on the channel ("consumer key")
// in the same round trip.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var enqueueScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(enqueueLua + `
local id = enqueue(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[3] .. ' ' .. ARGV[2])
return id
`)
})

// takeLua defines took(out, e, crashes), which appends stream entry e's
// id, data, order and crash count (from the hash crashes) to out;
// takeNew(out, stream, consumer, crashes), which does so for every item of
// stream nobody took yet, now taken by consumer (none when the stream is
// gone: its last item ended); and retake(out, stream, consumer, since,
// crashes), which does so for the items consumer took with ids above since
// (Inbox.since: the items earlier takes took whose answers were lost).
// takeScript and admitScript share them. Taking an item does not blame it
// for a crash: only Begin does.
const takeLua = `
local function took(out, e, crashes)
  if e and e[2] then
    local f = {}
    for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i+1] end
    table.insert(out, e[1]); table.insert(out, f['d']); table.insert(out, f['n'])
    table.insert(out, redis.call('HGET', crashes, e[1]) or '0')
  end
end
local function takeNew(out, stream, consumer, crashes)
  if redis.call('EXISTS', stream) == 0 then return end
  local r = redis.call('XREADGROUP', 'GROUP', 'pibot', consumer, 'COUNT', 100000, 'STREAMS', stream, '>')
  if r and r[1] then
    for _, e in ipairs(r[1][2]) do took(out, e, crashes) end
  end
end
local function retake(out, stream, consumer, since, crashes)
  if redis.call('EXISTS', stream) == 0 then return end
  local r = redis.call('XREADGROUP', 'GROUP', 'pibot', consumer, 'COUNT', 100000, 'STREAMS', stream, since)
  if r and r[1] then
    for _, e in ipairs(r[1][2]) do took(out, e, crashes) end
  end
end
`

// takeScript hands consumer ARGV[1] the items of stream KEYS[1] it took
// with ids above ARGV[3] (retake), those nobody took yet and, when
// ARGV[2] is "claim", those other consumers hold too; it returns how many
// quadruples the retake gave, then id, data, n, crashes quadruples
// (crashes from the hash KEYS[2]).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var takeScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(takeLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local out = {}
retake(out, KEYS[1], ARGV[1], ARGV[3], KEYS[2])
table.insert(out, 1, tostring(#out / 4))
takeNew(out, KEYS[1], ARGV[1], KEYS[2])
if ARGV[2] == 'claim' then
  local p = redis.call('XPENDING', KEYS[1], 'pibot', '-', '+', 100000)
  for _, x in ipairs(p) do
    if x[2] ~= ARGV[1] then
      local c = redis.call('XCLAIM', KEYS[1], 'pibot', ARGV[1], 0, x[1])
      for _, e in ipairs(c) do took(out, e, KEYS[2]) end
    end
  end
end
return out
`)
})

// endScript ends item ARGV[1] of key ARGV[2] (KEYS stream, crashes, keys,
// touched set of this consumer, quarantine list): acknowledged and
// deleted, and with ARGV[4] = "quarantine" first pushed onto the list.
// ARGV[5] is the prefix of touched sets, for the enqueuer's. Returns 0
// when the item was not pending.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var endScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #e == 0 then return 0 end
local f = {}
for i = 1, #e[1][2], 2 do f[e[1][2][i]] = e[1][2][i+1] end
local crashes = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if ARGV[4] == 'quarantine' then
  redis.call('RPUSH', KEYS[5], cjson.encode({id = ARGV[1], key = ARGV[2], data = f['d'], crashes = crashes}))
end
redis.call('XACK', KEYS[1], 'pibot', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
local m = ARGV[1] .. ' ' .. ARGV[2]
redis.call('SREM', KEYS[4], m)
if f['by'] then redis.call('SREM', ARGV[5] .. f['by'], m) end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
else
  local g = {}
  for i = 1, #first[1][2], 2 do g[first[1][2][i]] = first[1][2][i+1] end
  redis.call('ZADD', KEYS[3], g['n'], ARGV[2])
end
return 1
`)
})

// openScript starts consumer ARGV[1] of replica record KEYS[1]: when the
// replica's last consumer did not stop cleanly, every item whose work it
// began (Begin) and did not end counts one crash. ARGV[2] is the key
// prefix P{inbox}:.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var openScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(`
local prev = redis.call('HGETALL', KEYS[1])
local r = {}
for i = 1, #prev, 2 do r[prev[i]] = prev[i+1] end
if r['c'] then
  local t = ARGV[2] .. 't:' .. r['c']
  if r['clean'] ~= '1' then
    for _, m in ipairs(redis.call('SMEMBERS', t)) do
      local sp = string.find(m, ' ', 1, true)
      local id, key = string.sub(m, 1, sp - 1), string.sub(m, sp + 1)
      if #redis.call('XRANGE', ARGV[2] .. 's:' .. key, id, id) > 0 then
        redis.call('HINCRBY', ARGV[2] .. 'c:' .. key, id, 1)
      end
    end
  end
  redis.call('DEL', t)
end
redis.call('HSET', KEYS[1], 'c', ARGV[1], 'clean', '0')
return 1
`)
})

// streamID is the shape of a Redis stream entry id.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var streamID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+-[0-9]+$`) })

// Inbox is the shared inbox of every replica: a Redis stream per key (a
// chat location) with a consumer group. Any replica enqueues; the replica
// holding the session's lease consumes (XREADGROUP) and, after taking the
// session over, claims (XCLAIM) what a dead holder took; an item is
// acknowledged and deleted once its session recorded it.
//
// Crash counting matches the embedded inbox: each process is a consumer
// of its own, recorded per replica identity; an item whose work the
// process began (Begin, or an admission with Run) and did not end counts
// one crash when the next process of the same replica finds its
// predecessor did not Close; items that only waited count nothing. Items are
// durable as Redis makes them (appendonly is recommended): Enqueue's
// durable function has nothing to wait for.
//
// Inbox holds the gateway-facing methods and delegates to its parts, each
// with one job: the store (the client, the key names, sealing, repair),
// the loss guard (the copies of items and the epoch mark: lost.go), the
// taker (the consumer and claim side) and the crash counter (Begin, cut
// Leave, the quarantine list, the clean stop).
type Inbox struct {
	st    *inboxStore
	loss  *lossGuard
	takes *taker
	crash *crashCounter
}

// OpenInbox starts this process's consumer of the inbox for replica (the
// stable identity of this replica: a restart with the same identity finds
// what its predecessor left, counting its crash). Two live processes must
// not share a replica identity (the data directory's replica lock sees
// to that).
func OpenInbox(ctx context.Context, rdb redis.UniversalClient, opts Options, replica string) (*Inbox, error) {
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	st := &inboxStore{rdb: rdb, base: opts.KeyPrefix() + "{inbox}:", replica: replica, consumer: replica + "#" + token, opts: opts}
	st.fix = &repairer{st: st}
	loss := &lossGuard{st: st}
	ib := &Inbox{st: st, loss: loss, takes: &taker{st: st, loss: loss}, crash: &crashCounter{st: st}}
	if err := ib.crash.open(ctx); err != nil {
		return nil, fmt.Errorf("rediscluster: inbox open: %w", err)
	}
	if err := loss.markEpoch(ctx); err != nil {
		return nil, fmt.Errorf("rediscluster: inbox open: %w", err)
	}
	return ib, nil
}

// Enqueue appends data to key's stream. The item is pending and held by
// nobody until a Consume takes it; a crash counts against it once its
// work begins (Begin). durable returns nil: the item is in Redis.
func (ib *Inbox) Enqueue(ctx context.Context, key string, data []byte) (string, func() error, error) {
	id, err := ib.loss.enqueueSealed(ctx, key, ib.st.seal(key, data))
	if err != nil {
		return "", nil, fmt.Errorf("rediscluster: inbox enqueue: %w", err)
	}
	return id, func() error { return nil }, nil
}

// Consume hands this process the items of key nobody took yet, oldest
// first, and those an earlier take of key took for it whose answer was
// lost (given). The caller holds the session's lease; a failed take is
// worth trying again soon, since it may have taken items.
func (ib *Inbox) Consume(ctx context.Context, key string) ([]cluster.InboxItem, error) {
	return ib.takes.take(ctx, key, "consume")
}

// Claim takes the items of key nobody took yet and those other processes
// hold, oldest first (with those of lost answers, as Consume, and those
// this process left: Leave). The caller holds the session's lease, so
// whoever held them before is gone (crashed, stopped, or lost the lease).
func (ib *Inbox) Claim(ctx context.Context, key string) ([]cluster.InboxItem, error) {
	return ib.takes.take(ctx, key, "claim")
}

// Pending lists the items of key not yet acknowledged, whoever handles
// them, oldest first.
func (ib *Inbox) Pending(ctx context.Context, key string) ([]cluster.InboxItem, error) {
	msgs, err := ib.st.rdb.XRange(ctx, ib.st.stream(key), "-", "+").Result()
	if err != nil {
		return nil, fmt.Errorf("rediscluster: inbox pending: %w", err)
	}
	res := make([]string, 0, 3*len(msgs))
	for _, m := range msgs {
		d, _ := m.Values["d"].(string)
		n, _ := m.Values["n"].(string)
		res = append(res, m.ID, d, n)
	}
	items, _, err := ib.crash.withCrashes(ctx, key, res)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: inbox pending: %w", err)
	}
	return ib.st.readable(key, items), nil
}

// Keys lists the keys with pending items, each once, in the order of
// their oldest item.
func (ib *Inbox) Keys(ctx context.Context) ([]string, error) {
	ks, err := ib.loss.keysChecked(ctx)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: inbox keys: %w", err)
	}
	if len(ks) == 0 {
		return nil, nil
	}
	return ks, nil
}

// Ack ends item id of key: acknowledged and deleted. Acknowledging an
// item that is not pending under key does nothing.
func (ib *Inbox) Ack(ctx context.Context, key, id string) error {
	if err := ib.takes.end(ctx, key, id, "ack"); err != nil {
		return fmt.Errorf("rediscluster: inbox ack: %w", err)
	}
	return nil
}

// Quarantine sets the pending item id of key aside for good: it leaves the
// stream and is kept in a list (Quarantined). An item that is not pending
// under key is left alone.
func (ib *Inbox) Quarantine(ctx context.Context, key, id string) error {
	if err := ib.takes.end(ctx, key, id, "quarantine"); err != nil {
		return fmt.Errorf("rediscluster: inbox quarantine: %w", err)
	}
	return nil
}

// Quarantined returns the items set aside, oldest first.
func (ib *Inbox) Quarantined(ctx context.Context) ([]cluster.InboxItem, error) {
	return ib.crash.quarantined(ctx)
}

// Close records a clean stop of this process: the items it still holds
// did not crash it. It does not close the client.
func (ib *Inbox) Close() error {
	return ib.crash.close()
}

// Begin records that this process now executes the work of the items ids
// of key (a run took their messages, or their command's or press's
// handler runs): a crash of this process before they end (Ack, Quarantine,
// Leave) counts against them. One round trip; an admission that runs its
// item at once records it in its own (cluster.Admission.Run).
func (ib *Inbox) Begin(ctx context.Context, key string, ids ...string) error {
	return ib.crash.begin(ctx, key, ids)
}

// Sync checks that Redis answers: the inbox's health probe (nil means it
// can take items again).
func (ib *Inbox) Sync() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ib.st.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("rediscluster: inbox: %w", err)
	}
	return nil
}
