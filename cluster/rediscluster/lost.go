package rediscluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis that loses its data (FLUSHALL, an eviction, a restart without
// persistence, a failover to an empty replica) loses the items in the
// inbox's streams: those waiting and those a replica has in hand, whose
// runs the lost leases then stop. Each process therefore keeps a copy of
// every item it enqueued or took (kept), and the inbox keeps an epoch
// mark, P{inbox}:epoch, a random token set once. Keys (every poll of the
// pump) reads the mark in the same round trip; when it is gone or
// changed, Redis lost its data: the process marks a new epoch, reports
// the loss (Options.OnDataLost) and enqueues again every copy it holds
// that is no longer in its stream, except those in hand, which Leave
// enqueues again when their session's owner gives them up (its lease,
// gone with the data, is lost within a renewal). A copy leaves once its
// item ended here, or its key has no pending items left, or after
// keptFor.
//
// Two replicas may hold copies of one item (its enqueuer, and the one that
// took it): a guard key per item (P{inbox}:re:<hash>, set if absent, for
// requeueGuard) lets the first enqueue it again and the second skip it.

// keptFor is how long a copy of an item this process did not take is
// kept at most, in case another replica took it and ended it.
const keptFor = time.Hour

// requeueGuard is how long the guard against a second requeue of one item
// lives.
const requeueGuard = 10 * time.Minute

// keptItem is the copy of one item.
type keptItem struct {
	sealed string
	taken  bool      // in hand: enqueued again by Leave, not by recovery
	epoch  string    // the epoch mark when it was stored or taken
	at     time.Time // when it was kept
}

// kept holds the copies, by key and id, and the epoch mark this process
// knows.
type kept struct {
	mu    sync.Mutex
	epoch string
	keys  map[string]map[string]*keptItem
}

func (k *kept) add(key, id, sealed string, taken bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addLocked(key, id, sealed, taken, k.epoch)
}

func (k *kept) addLocked(key, id, sealed string, taken bool, epoch string) {
	if k.keys == nil {
		k.keys = map[string]map[string]*keptItem{}
	}
	m := k.keys[key]
	if m == nil {
		m = map[string]*keptItem{}
		k.keys[key] = m
	}
	if it := m[id]; it != nil {
		it.taken = it.taken || taken
		return
	}
	m[id] = &keptItem{sealed: sealed, taken: taken, epoch: epoch, at: time.Now()}
}

func (k *kept) ended(key, id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m := k.keys[key]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(k.keys, key)
		}
	}
}

// prune drops the copies not in hand that were kept before since of the
// keys not in pending (their items all ended), and those older than
// keptFor.
func (k *kept) prune(pending []string, since time.Time) {
	live := make(map[string]bool, len(pending))
	for _, p := range pending {
		live[p] = true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, m := range k.keys {
		for id, it := range m {
			if !it.taken && (!live[key] && it.at.Before(since) || time.Since(it.at) > keptFor) {
				delete(m, id)
			}
		}
		if len(m) == 0 {
			delete(k.keys, key)
		}
	}
}

// maxWatched bounds the streams one Keys asks about the copies of.
const maxWatched = 64

// untakenKeys returns up to n keys with copies not in hand.
func (k *kept) untakenKeys(n int) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for key, m := range k.keys {
		for _, it := range m {
			if !it.taken {
				out = append(out, key)
				break
			}
		}
		if len(out) == n {
			break
		}
	}
	return out
}

// delivered drops the copies not in hand of key's items up to last, the
// last one the consumer group handed out: whoever took them keeps a copy.
func (k *kept) delivered(key, last string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.keys[key]
	for id, it := range m {
		if !it.taken && !idAfter(id, last) {
			delete(m, id)
		}
	}
	if m != nil && len(m) == 0 {
		delete(k.keys, key)
	}
}

// lossGuard is the data-loss side of the Inbox: it keeps a copy of every
// item this process enqueued or took (kept), watches the epoch mark, and
// enqueues again what a Redis that lost its data lost.
type lossGuard struct {
	st   *inboxStore
	kept kept
}

// keptRef names one copy.
type keptRef struct {
	key, id string
	it      keptItem
}

// lost returns the copies stored before epoch: those in hand (taken) or
// those not, for key ("" for every key).
func (k *kept) lost(key, epoch string, taken bool) []keptRef {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []keptRef
	for kk, m := range k.keys {
		if key != "" && kk != key {
			continue
		}
		for id, it := range m {
			if it.taken == taken && it.epoch != epoch {
				out = append(out, keptRef{kk, id, *it})
			}
		}
	}
	// Enqueued again in the order they came: a key's by stream id.
	sort.Slice(out, func(i, j int) bool {
		if out[i].key != out[j].key {
			return out[i].key < out[j].key
		}
		return idAfter(out[j].id, out[i].id)
	})
	return out
}

// markEpoch sets the epoch mark unless it is set and records it.
func (g *lossGuard) markEpoch(ctx context.Context) error {
	token, err := newToken()
	if err != nil {
		return err
	}
	if err := g.st.rdb.SetNX(ctx, g.st.epochKey(), token, 0).Err(); err != nil {
		return err
	}
	mark, err := g.st.rdb.Get(ctx, g.st.epochKey()).Result()
	if err != nil {
		return err
	}
	g.kept.mu.Lock()
	g.kept.epoch = mark
	g.kept.mu.Unlock()
	return nil
}

// knownEpoch returns the epoch mark this process last saw.
func (g *lossGuard) knownEpoch() string {
	g.kept.mu.Lock()
	defer g.kept.mu.Unlock()
	return g.kept.epoch
}

// keysChecked lists the keys with pending items and, in the same round
// trip, reads the epoch mark: when Redis lost its data, it recovers
// (recoverLost) and lists them again. Otherwise it drops the copies of
// keys that have no pending items left.
func (g *lossGuard) keysChecked(ctx context.Context) ([]string, error) {
	since := time.Now()
	var mark *redis.StringCmd
	var keys *redis.StringSliceCmd
	watched := g.kept.untakenKeys(maxWatched)
	groups := make([]*redis.XInfoGroupsCmd, len(watched))
	err := g.st.fixing(ctx, "", func() error {
		_, err := g.st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			mark = p.Get(ctx, g.st.epochKey())
			keys = p.ZRange(ctx, g.st.base+"keys", 0, -1)
			for i, k := range watched {
				groups[i] = p.XInfoGroups(ctx, g.st.stream(k))
			}
			return nil
		})
		if err == nil {
			return nil
		}
		// A stream that is gone or not one is no error of Keys.
		if err := mark.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		return keys.Err()
	})
	if err != nil {
		return nil, err
	}
	for i, k := range watched {
		for _, grp := range groups[i].Val() {
			if grp.Name == "pibot" {
				g.kept.delivered(k, grp.LastDeliveredID)
			}
		}
	}
	if m, _ := mark.Result(); m != g.knownEpoch() {
		if err := g.recoverLost(ctx); err != nil {
			return nil, err
		}
		return g.st.rdb.ZRange(ctx, g.st.base+"keys", 0, -1).Result()
	}
	ks := keys.Val()
	g.kept.prune(ks, since)
	// Copies a recovery could not enqueue again (Redis failed meanwhile).
	if retry := g.kept.lost("", g.knownEpoch(), false); len(retry) > 0 {
		if err := g.requeue(ctx, retry); err != nil {
			return nil, err
		}
		return g.st.rdb.ZRange(ctx, g.st.base+"keys", 0, -1).Result()
	}
	return ks, nil
}

// checkEpoch reads the epoch mark and recovers when Redis lost its data.
func (g *lossGuard) checkEpoch(ctx context.Context) error {
	m, err := g.st.rdb.Get(ctx, g.st.epochKey()).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if m == g.knownEpoch() {
		return nil
	}
	return g.recoverLost(ctx)
}

// recoverLost handles a Redis that lost its data: it marks a new epoch
// (or takes the one another replica marked), reports the loss, and
// enqueues again the copies not in hand whose items are gone.
func (g *lossGuard) recoverLost(ctx context.Context) error {
	if err := g.markEpoch(ctx); err != nil {
		return fmt.Errorf("rediscluster: inbox: mark a new epoch: %w", err)
	}
	if g.st.opts.OnDataLost != nil {
		g.st.opts.OnDataLost()
	}
	return g.requeue(ctx, g.kept.lost("", g.knownEpoch(), false))
}

// afterLeave ends Leave (adding its error to *err): after a loss of data,
// the items of key in hand that were stored before it are gone from
// Redis, and the owner that gives them up stopped their runs: they are
// enqueued again here. Those stored since stay for a Claim as usual, as
// copies not in hand.
func (g *lossGuard) afterLeave(ctx context.Context, key string, err *error) {
	if lerr := g.leaving(ctx, key); lerr != nil {
		*err = errors.Join(*err, fmt.Errorf("rediscluster: inbox leave: %w", lerr))
	}
}

func (g *lossGuard) leaving(ctx context.Context, key string) error {
	if err := g.checkEpoch(ctx); err != nil {
		return err
	}
	lost := g.kept.lost(key, g.knownEpoch(), true)
	g.kept.mu.Lock()
	for _, it := range g.kept.keys[key] {
		it.taken = false // no longer in hand; still a copy
	}
	g.kept.mu.Unlock()
	return g.requeue(ctx, lost)
}

// requeue enqueues again each copy whose item is no longer in its stream,
// unless another replica did first (the guard key), and reports how many
// it enqueued per key. A copy it could not enqueue stays, stored before
// the new epoch, for the next recovery.
func (g *lossGuard) requeue(ctx context.Context, copies []keptRef) error {
	if len(copies) == 0 {
		return nil
	}
	present := make([]*redis.XMessageSliceCmd, len(copies))
	if _, err := g.st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range copies {
			present[i] = p.XRange(ctx, g.st.stream(c.key), c.id, c.id)
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		var rerr redis.Error
		if !errors.As(err, &rerr) { // a wrong type is repaired by the enqueue
			return fmt.Errorf("rediscluster: inbox requeue: %w", err)
		}
	}
	counts := map[string]int{}
	var errs []error
	for i, c := range copies {
		if msgs, _ := present[i].Result(); len(msgs) == 1 && msgs[0].Values["d"] == c.it.sealed {
			g.kept.restamp(c.key, c.id, g.knownEpoch())
			continue // still there (stored after the loss)
		}
		sum := sha256.Sum256([]byte(c.key + "\x00" + c.it.sealed))
		first, err := g.st.rdb.SetNX(ctx, g.st.base+"re:"+hex.EncodeToString(sum[:16]), "1", requeueGuard).Result()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.kept.ended(c.key, c.id)
		if !first {
			continue // another replica enqueued it again
		}
		if _, err := g.enqueueSealed(ctx, c.key, c.it.sealed); err != nil {
			g.kept.mu.Lock() // for the next try: still lost
			g.kept.addLocked(c.key, c.id, c.it.sealed, false, "")
			g.kept.mu.Unlock()
			_ = g.st.rdb.Del(ctx, g.st.base+"re:"+hex.EncodeToString(sum[:16])).Err()
			errs = append(errs, err)
			continue
		}
		counts[c.key]++
	}
	if g.st.opts.OnRequeued != nil {
		for key, n := range counts {
			g.st.opts.OnRequeued(key, n)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rediscluster: inbox requeue: %w", err)
	}
	return nil
}

// restamp records that the copy of key's item id is stored in epoch.
func (k *kept) restamp(key, id, epoch string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if it := k.keys[key][id]; it != nil {
		it.epoch = epoch
	}
}

// enqueueSealed enqueues an item sealed for key and keeps a copy of it.
func (g *lossGuard) enqueueSealed(ctx context.Context, key, sealed string) (string, error) {
	var id string
	err := g.st.fixing(ctx, key, func() (err error) {
		id, err = enqueueScript().Run(ctx, g.st.rdb,
			[]string{g.st.stream(key), g.st.base + "keys", g.st.base + "seq"},
			sealed, key, g.st.consumer, g.st.channel()).Text()
		return err
	})
	if err != nil {
		return "", err
	}
	g.kept.add(key, id, sealed, false)
	return id, nil
}
