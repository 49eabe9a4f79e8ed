package rediscluster

import (
	"context"
	"encoding/json"

	"github.com/pibot/pibot/cluster"
)

// The inbox seals each item's data for its stream (Options.Keys) at the Go
// boundary of its scripts: Enqueue and Admit seal, every read opens. The
// scripts move sealed text and never look inside it.

// seal returns data sealed for key's stream.
func (ib *Inbox) seal(key string, data []byte) string {
	return ib.opts.Keys.Seal(ib.stream(key), data)
}

// opened opens the data of items taken from key (and keeps a copy of
// each, sealed, for lost.go). An item that does not open was not written
// by a replica with the cluster secret: it is reported, ended (deleted
// from the stream) and left out, so it is never executed; order keeps
// step with items.
func (ib *Inbox) opened(ctx context.Context, key string, items []cluster.InboxItem, order []int64) ([]cluster.InboxItem, []int64) {
	n := 0
	for i, it := range items {
		sealed := string(it.Data)
		plain, err := ib.opts.Keys.Open(ib.stream(key), sealed)
		if err != nil {
			ib.opts.forged("inbox", ib.stream(key)+" "+it.ID)
			// A failed end leaves it pending: the next take drops it again.
			_ = ib.end(ctx, key, it.ID, "ack")
			continue
		}
		ib.kept.add(key, it.ID, sealed, true)
		it.Data = json.RawMessage(plain)
		items[n], order[n] = it, order[i]
		n++
	}
	return items[:n], order[:n]
}

// readable returns the items of key whose data opens, opened, for the
// listings (Pending, Quarantined), which change nothing: a forged item is
// dropped by the take that meets it.
func (ib *Inbox) readable(key string, items []cluster.InboxItem) []cluster.InboxItem {
	out := items[:0]
	for _, it := range items {
		plain, err := ib.opts.Keys.Open(ib.stream(key), string(it.Data))
		if err != nil {
			continue
		}
		it.Data = json.RawMessage(plain)
		out = append(out, it)
	}
	return out
}
