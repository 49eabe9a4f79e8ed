package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// errMalformed is a script's answer that does not have the shape its
// caller reads: a stream entry without the fields pibot writes.
var errMalformed = errors.New("malformed reply")

// maxRepairs bounds the repairs of one inbox call: each fixes what the
// last error showed, and a key can be wrong in a few ways at once.
const maxRepairs = 3

// repairer keeps the shape of the inbox's keys: it repairs what someone
// with write access to Redis left misshapen.
type repairer struct {
	st *inboxStore
}

// fixing runs fn and, when Redis refused it for the shape of the inbox's
// keys (a stream without the consumer group, a key of another type, an
// entry without pibot's fields: what someone with write access to Redis
// can leave behind), repairs the keys of key (or only the shared ones,
// for key "") and runs fn again, so the intake goes on instead of failing
// on every call. Each repair is reported (Options.OnRepaired). Errors
// that are not Redis's answer (the network, a cancelled context) are
// returned at once.
func (r *repairer) fixing(ctx context.Context, key string, fn func() error) error {
	err := fn()
	for range maxRepairs {
		if !misshapen(err) {
			return err
		}
		fixed, ferr := r.repair(ctx, key)
		if ferr != nil || !fixed {
			return err
		}
		err = fn()
	}
	return err
}

// misshapen reports whether err is Redis refusing a call for the shape
// of its keys, or an answer without the shape pibot writes (and not a
// full memory, a timeout or the network, which no repair helps).
func misshapen(err error) bool {
	var rerr redis.Error
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	if errors.Is(err, errMalformed) {
		return true
	}
	if !errors.As(err, &rerr) {
		return false
	}
	msg := err.Error()
	// Inside a script the server's error comes wrapped in the script's.
	return strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "NOGROUP") ||
		strings.Contains(msg, "must be strings or integers") || strings.Contains(msg, "not a valid float")
}

// repair checks the inbox's keys that the calls for key touch and fixes
// what is wrong: a key of the wrong type is deleted (it holds nothing
// pibot wrote), a stream gets its consumer group back (delivering from
// its start: the items enqueued meanwhile), and stream entries without
// pibot's fields are deleted. It reports whether it changed anything.
func (r *repairer) repair(ctx context.Context, key string) (bool, error) {
	want := map[string]string{
		r.st.base + "keys": "zset", r.st.base + "seq": "string", r.st.touched(): "set",
		r.st.base + "r:" + r.st.replica: "hash", r.st.base + "q": "list", r.st.epochKey(): "string",
	}
	if key != "" {
		want[r.st.stream(key)] = "stream"
		want[r.st.base+"c:"+key] = "hash"
	}
	fixed := false
	for k, typ := range want {
		got, err := r.st.rdb.Type(ctx, k).Result()
		if err != nil {
			return fixed, err
		}
		if got == "none" || got == typ {
			continue
		}
		if err := r.st.rdb.Del(ctx, k).Err(); err != nil {
			return fixed, err
		}
		r.repaired(k, fmt.Sprintf("deleted a %s where a %s belongs", got, typ))
		fixed = true
		if k == r.st.base+"keys" {
			if err := r.relist(ctx); err != nil {
				return fixed, err
			}
		}
	}
	if key == "" {
		return fixed, nil
	}
	f, err := r.repairStream(ctx, r.st.stream(key))
	return fixed || f, err
}

// repairStream gives stream its consumer group back and deletes the
// entries without pibot's fields (d, and n an integer).
func (r *repairer) repairStream(ctx context.Context, stream string) (bool, error) {
	if n, err := r.st.rdb.Exists(ctx, stream).Result(); err != nil || n == 0 {
		return false, err
	}
	fixed := false
	groups, err := r.st.rdb.XInfoGroups(ctx, stream).Result()
	if err != nil {
		return false, err
	}
	has := false
	for _, g := range groups {
		has = has || g.Name == "pibot"
	}
	if !has {
		if err := r.st.rdb.XGroupCreate(ctx, stream, "pibot", "0").Err(); err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
			return false, err
		}
		r.repaired(stream, "created the missing consumer group")
		fixed = true
	}
	msgs, err := r.st.rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		return fixed, err
	}
	for _, m := range msgs {
		_, hasD := m.Values["d"].(string)
		n, _ := m.Values["n"].(string)
		if _, err := strconv.ParseInt(n, 10, 64); hasD && err == nil {
			continue
		}
		if _, err := r.st.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, stream, "pibot", m.ID)
			p.XDel(ctx, stream, m.ID)
			return nil
		}); err != nil {
			return fixed, err
		}
		r.repaired(stream, "deleted entry "+m.ID+" without pibot's fields")
		fixed = true
	}
	return fixed, nil
}

// relist lists again, in the sorted set of keys with pending items, every
// stream of the inbox that has items, scored by its oldest one's order.
func (r *repairer) relist(ctx context.Context) error {
	iter := r.st.rdb.Scan(ctx, 0, globEscape(r.st.base+"s:")+"*", 1000).Iterator()
	for iter.Next(ctx) {
		stream := iter.Val()
		first, err := r.st.rdb.XRangeN(ctx, stream, "-", "+", 1).Result()
		if err != nil || len(first) == 0 {
			continue // not a stream (repaired when used), or empty
		}
		n, _ := first[0].Values["n"].(string)
		score, _ := strconv.ParseFloat(n, 64)
		if err := r.st.rdb.ZAddNX(ctx, r.st.base+"keys", redis.Z{Score: score, Member: stream[len(r.st.base+"s:"):]}).Err(); err != nil {
			return err
		}
	}
	return iter.Err()
}

// repaired reports a repair.
func (r *repairer) repaired(at, what string) {
	if r.st.opts.OnRepaired != nil {
		r.st.opts.OnRepaired(at, what)
	}
}
