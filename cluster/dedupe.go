package cluster

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// LocalDedupe remembers keys for a TTL, bounded in size (oldest evicted first).
type LocalDedupe struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	now   func() time.Time
	seen  map[string]*list.Element
	order *list.List
}

type dedupeItem struct {
	key string
	at  time.Time
}

// NewDedupe remembers up to max keys for ttl each.
func NewDedupe(ttl time.Duration, max int) *LocalDedupe {
	return &LocalDedupe{ttl: ttl, max: max, now: time.Now, seen: map[string]*list.Element{}, order: list.New()}
}

// Seen records key and reports whether it was already recorded within the TTL.
func (d *LocalDedupe) Seen(_ context.Context, key string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for e := d.order.Front(); e != nil; e = d.order.Front() {
		it := e.Value.(dedupeItem)
		if now.Sub(it.at) < d.ttl && d.order.Len() <= d.max {
			break
		}
		d.order.Remove(e)
		delete(d.seen, it.key)
	}
	if _, ok := d.seen[key]; ok {
		return true, nil
	}
	d.seen[key] = d.order.PushBack(dedupeItem{key: key, at: now})
	return false, nil
}

// Forget removes key, so a redelivery is accepted again (used when
// processing failed before the message became durable).
func (d *LocalDedupe) Forget(_ context.Context, key string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.seen[key]; ok {
		d.order.Remove(e)
		delete(d.seen, key)
	}
	return nil
}
