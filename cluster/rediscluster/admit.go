package rediscluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
)

// admitScript admits one inbound event in one round trip: the dedupe, the
// sender's budget, the inbox item and, for the session's holder, the
// taking of the items nobody took yet. Every key is in the inbox's slot
// (dedupe.go, budget.go), so it runs on a Redis Cluster too.
//
// KEYS: dedupe key, budget bucket, budget pause window, stream, keys,
// seq, touched set of this consumer, crash counts of the stream.
// ARGV: dedupe token ("" when not deduplicated), dedupe TTL in ms, budget
// rate ("" when not budgeted), burst, now, call token, data, location
// key, consumer, notice channel, "take" or "", the id above which
// the items this consumer holds came with lost answers (Inbox.given),
// "mark" when KEYS[1] is a dedupe key an earlier step set (Admission.Seen)
// that is to record the item's id, as a deduplicated admission's does,
// and to live for the TTL from now on (committed: Seen recorded it
// pending; one that expired meanwhile is recorded again),
// and "run" when the new item's work begins at once (Admission.Run: when
// it is the only item taken, it joins the touched set, as Inbox.Begin
// would add it).
//
// It returns {"dup"}, {"busy"} (another delivery's pending key: in
// flight), {"wait", µs} or {"ok", id, then id, data, n, crashes for each
// item taken}. The dedupe key records the call's token
// and, once enqueued, the item's id, so this call run again (go-redis
// retries after a lost answer) neither counts as its own duplicate nor
// enqueues a second item: it answers the same id. With "take" it also
// hands over again what the consumer took with lost answers (retake: the
// item itself, when this is a run again, and what the lost answer took
// along with it), then anything new. A
// duplicate takes no budget token; an event over budget is not enqueued
// (its token is taken and its dedupe key stays, as SeenReserve leaves
// them).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var admitScript = sync.OnceValue(func() *redis.Script {
	return redis.NewScript(bucketLua + enqueueLua + takeLua + `
local out = {}
local again
if ARGV[1] ~= '' then
  local v = redis.call('GET', KEYS[1])
  if not v then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  else
    local sp = string.find(v, ' ', 1, true)
    if sp and string.sub(v, 1, sp - 1) == ARGV[1] then
      again = string.sub(v, sp + 1)
    elseif not sp and string.sub(v, 1, 1) == '~' then
      return {'busy'}
    elseif v ~= ARGV[1] then
      return {'dup'}
    end
  end
end
if again then
  out = {'ok', again}
else
  if ARGV[3] ~= '' then
    local wait = bucket(KEYS[2], KEYS[3], ARGV[3], ARGV[4], ARGV[5], 'reserve', ARGV[6])
    if wait > 0 then return {'wait', wait} end
  end
  local id = enqueue(KEYS[4], KEYS[5], KEYS[6], ARGV[7], ARGV[8], ARGV[9])
  if ARGV[1] ~= '' then
    redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. id, 'KEEPTTL')
  elseif ARGV[13] == 'mark' then
    local v = redis.call('GET', KEYS[1])
    if not v then
      redis.call('SET', KEYS[1], '- ' .. id, 'PX', ARGV[2])
    elseif not string.find(v, ' ', 1, true) then
      redis.call('SET', KEYS[1], v .. ' ' .. id, 'PX', ARGV[2])
    end
  end
  out = {'ok', id}
  if ARGV[11] ~= 'take' then
    redis.call('PUBLISH', ARGV[10], ARGV[9] .. ' ' .. ARGV[8])
    return out
  end
end
if ARGV[11] == 'take' then
  retake(out, KEYS[4], ARGV[9], ARGV[12], KEYS[8])
  takeNew(out, KEYS[4], ARGV[9], KEYS[8])
  if ARGV[14] == 'run' and #out == 6 and out[3] == out[2] then
    redis.call('SADD', KEYS[7], out[2] .. ' ' .. ARGV[8])
  end
end
return out
`)
})

// Admit admits one inbound event in one round trip (admitScript): the
// dedupe (a.Dedupe), the sender's budget (a.Budget), and, unless the event
// is a duplicate or over budget, its item enqueued under a.Key. With
// a.Take, the items of a.Key nobody took yet, the new one included, are
// taken for this process as Inbox.Consume takes them, so the holder of the
// session needs no Consume for them; without it, the other replicas are
// told of the item (Inbox.Watch), as Inbox.Enqueue tells them. With
// a.Take and a.Run, the new item's work is recorded begun (Inbox.Begin)
// when it is the only item taken.
//
// An error leaves it unknown whether the item was enqueued (the answer may
// be lost after the script ran); the dedupe key may be recorded. With
// a.Take, what the lost answer took comes with the next take of a.Key
// (Inbox.Consume, Inbox.Claim, or Admit with Take): see given.
func (a *Admission) Admit(ctx context.Context, ad cluster.Admission) (cluster.Admitted, error) {
	ib := a.inbox
	dedupeKey, token := ib.st.base+"d:", ""
	if ad.Dedupe != "" {
		t, err := newToken()
		if err != nil {
			return cluster.Admitted{}, err
		}
		dedupeKey, token = a.prefix+ad.Dedupe, t
	}
	mark := ""
	if ad.Dedupe == "" && ad.Seen != "" {
		dedupeKey, mark = a.prefix+ad.Seen, "mark"
	}
	// Placeholders in the inbox's slot when there is no budget: a Redis
	// Cluster checks every key a script names, used or not.
	budgetKeys, rate := []string{ib.st.base + "b:", ib.st.base + "b::pause"}, ""
	call, err := callToken()
	if err != nil {
		return cluster.Admitted{}, err
	}
	if ad.Budget != "" && a.budget.rate > 0 {
		budgetKeys, rate = a.budget.keys(ad.Budget), strconv.FormatFloat(a.budget.rate, 'g', -1, 64)
	}
	take, since, run := "", "0", ""
	if ad.Take {
		take, since = "take", ib.takes.given.since(ad.Key)
		if ad.Run {
			run = "run"
		}
	}
	keys := []string{dedupeKey, budgetKeys[0], budgetKeys[1], ib.st.stream(ad.Key), ib.st.base + "keys", ib.st.base + "seq",
		ib.st.touched(), ib.st.base + "c:" + ad.Key}
	sealed := ib.st.seal(ad.Key, ad.Data)
	var out cluster.Admitted
	var order []int64
	err = ib.st.fixing(ctx, ad.Key, func() error {
		res, err := admitScript().Run(ctx, a.rdb, keys, token, a.ttl.Milliseconds(), rate, a.budget.burst, a.budget.now.arg(),
			call, sealed, ad.Key, ib.st.consumer, ib.st.channel(), take, since, mark, run).Slice()
		if err != nil {
			return err
		}
		out, order, err = admitted(ad.Key, res)
		return err
	})
	if err != nil {
		return cluster.Admitted{}, fmt.Errorf("rediscluster: admit: %w", err)
	}
	if out.ID != "" {
		ib.loss.kept.add(ad.Key, out.ID, sealed, false)
	}
	out.Taken, order = ib.takes.opened(ctx, ad.Key, out.Taken, order, sealedItem{id: out.ID, sealed: sealed, plain: ad.Data})
	sortItems(out.Taken, order)
	ib.takes.given.add(ad.Key, out.Taken)
	return out, nil
}

// admitted reads admitScript's answer: the admission, and the order
// numbers of the items it took (still sealed, in the script's order).
func admitted(key string, res []any) (cluster.Admitted, []int64, error) {
	if len(res) == 0 {
		return cluster.Admitted{}, nil, fmt.Errorf("empty reply")
	}
	switch res[0] {
	case "dup":
		return cluster.Admitted{Dup: true}, nil, nil
	case "busy":
		return cluster.Admitted{}, nil, cluster.ErrInFlight
	case "wait":
		us, ok := res[1].(int64)
		if len(res) != 2 || !ok || us <= 0 {
			return cluster.Admitted{}, nil, fmt.Errorf("malformed wait %v", res)
		}
		return cluster.Admitted{Wait: time.Duration(us) * time.Microsecond}, nil, nil
	case "ok":
	default:
		return cluster.Admitted{}, nil, fmt.Errorf("unknown reply %v", res[0])
	}
	if len(res) < 2 || (len(res)-2)%4 != 0 {
		return cluster.Admitted{}, nil, fmt.Errorf("%w of %d values", errMalformed, len(res))
	}
	str := func(v any) string { s, _ := v.(string); return s }
	out := cluster.Admitted{ID: str(res[1])}
	order := make([]int64, 0, (len(res)-2)/4)
	for i := 2; i < len(res); i += 4 {
		it := cluster.InboxItem{ID: str(res[i]), Key: key, Data: json.RawMessage(str(res[i+1]))}
		it.Crashes, _ = strconv.Atoi(str(res[i+3]))
		n, _ := strconv.ParseInt(str(res[i+2]), 10, 64)
		out.Taken = append(out.Taken, it)
		order = append(order, n)
	}
	return out, order, nil
}
