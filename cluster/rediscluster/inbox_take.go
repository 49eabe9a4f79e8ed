package rediscluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/pibot/pibot/cluster"
)

// taker is the consumer side of the Inbox: it takes items (Consume,
// Claim), opens them, remembers what its takes brought (given) and ends
// them (Ack, Quarantine).
type taker struct {
	st   *inboxStore
	loss *lossGuard
	// given is what this process's takes brought it, to find the items
	// of takes whose answers were lost.
	given given
}

// take runs the take script: one round trip, crash counts included. A
// claim (rare: a takeover, every tenth poll of a held key) asks for every
// item this consumer holds and keeps those not in hand, so a lost answer
// of a claim, whose items may be older than since, is made up for too.
func (t *taker) take(ctx context.Context, key, mode string) ([]cluster.InboxItem, error) {
	since := "0"
	if mode != "claim" {
		since = t.given.since(key)
	}
	var res []string
	var retaken int
	err := t.st.fixing(ctx, key, func() (err error) {
		res, err = takeScript().Run(ctx, t.st.rdb, []string{t.st.stream(key), t.st.base + "c:" + key},
			t.st.consumer, mode, since).StringSlice()
		if err != nil || len(res) == 0 {
			return err
		}
		retaken, _ = strconv.Atoi(res[0])
		res = res[1:]
		if len(res)%4 != 0 || retaken < 0 || 4*retaken > len(res) {
			return errMalformed
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rediscluster: inbox %s: %w", mode, err)
	}
	if len(res) == 0 {
		return nil, nil
	}
	items := make([]cluster.InboxItem, 0, len(res)/4)
	order := make([]int64, 0, len(res)/4)
	for i := 0; i < len(res); i += 4 {
		if i < 4*retaken && t.given.has(key, res[i]) {
			continue // in hand
		}
		it := cluster.InboxItem{ID: res[i], Key: key, Data: json.RawMessage(res[i+1])}
		it.Crashes, _ = strconv.Atoi(res[i+3])
		n, _ := strconv.ParseInt(res[i+2], 10, 64)
		items = append(items, it)
		order = append(order, n)
	}
	items, order = t.opened(ctx, key, items, order, sealedItem{})
	if len(items) == 0 {
		return nil, nil
	}
	sortItems(items, order)
	t.given.add(key, items)
	return items, nil
}

// end ends item id of key: acknowledged and deleted, and with mode
// "quarantine" first set aside.
func (t *taker) end(ctx context.Context, key, id, mode string) error {
	if !streamID().MatchString(id) {
		return nil // never an item of a stream
	}
	err := t.st.fixing(ctx, key, func() error {
		return endScript().Run(ctx, t.st.rdb,
			[]string{t.st.stream(key), t.st.base + "c:" + key, t.st.base + "keys", t.st.touched(), t.st.base + "q"},
			id, key, t.st.consumer, mode, t.st.base+"t:").Err()
	})
	if err == nil {
		t.given.ended(key, id)
		t.loss.kept.ended(key, id)
	}
	return err
}

// sealedItem is an item this process sealed itself (an admission's, Admit):
// its id, the sealed text it sent and the data it sealed.
type sealedItem struct {
	id, sealed string
	plain      []byte
}

// opened opens the data of items taken from key (and keeps a copy of
// each, sealed, for lost.go). An item that does not open was not written
// by a replica with the cluster secret: it is reported, ended (deleted
// from the stream) and left out, so it is never executed; order keeps
// step with items. The item own names, taken back exactly as it was
// sealed, is not opened: its data is own.plain.
func (t *taker) opened(ctx context.Context, key string, items []cluster.InboxItem, order []int64, own sealedItem) ([]cluster.InboxItem, []int64) {
	n := 0
	for i, it := range items {
		sealed := string(it.Data)
		var plain []byte
		var err error
		if own.id != "" && it.ID == own.id && sealed == own.sealed {
			plain = own.plain
		} else {
			plain, err = t.st.opts.Keys.Open(t.st.stream(key), sealed)
		}
		if err != nil {
			t.st.opts.forged("inbox", t.st.stream(key)+" "+it.ID)
			// A failed end leaves it pending: the next take drops it again.
			_ = t.end(ctx, key, it.ID, "ack")
			continue
		}
		t.loss.kept.add(key, it.ID, sealed, true)
		it.Data = json.RawMessage(plain)
		items[n], order[n] = it, order[i]
		n++
	}
	return items[:n], order[:n]
}

// sortItems orders items by their order numbers.
func sortItems(items []cluster.InboxItem, order []int64) {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return order[idx[a]] < order[idx[b]] })
	sorted := make([]cluster.InboxItem, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
}
