package rediscluster

import (
	"strconv"
	"strings"
	"sync"

	"github.com/pibot/pibot/cluster"
)

// given remembers, per key, what this process's takes brought it and it
// has not ended yet: the ids in hand, and since, the highest id an answer
// brought. Every item a take took for this consumer (its pending entries)
// with an id above since was taken by a take whose answer never arrived:
// a timeout or a reset connection after the script ran, whether go-redis
// then ran the script again (its answer has only what was new by then)
// or gave up. The next take of the key hands those over too (retake, in
// the same script), so they do not wait for the session's lease to end;
// the ids at or below since are in hand, so nothing is handed twice. A
// claim, which may take other consumers' items older than since, reads
// everything the consumer holds instead and keeps what is not in hand.
//
// A key whose items in hand all ended is forgotten (since is then "0":
// everything the consumer still holds of it came with a lost answer), so
// it costs memory only while its items are being handled; so is a key
// this process left (Inbox.Leave: its session's lease was lost or
// released), whose items another replica may end. Takes of one key must
// not overlap (the gateway takes a key's items under its gate).
type given struct {
	mu   sync.Mutex
	keys map[string]*givenKey
}

// givenKey is what given remembers of one key.
type givenKey struct {
	since string
	ids   map[string]struct{}
}

// since returns the highest id handed for key and in hand, "0" if none.
func (g *given) since(key string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if k := g.keys[key]; k != nil {
		return k.since
	}
	return "0"
}

// inHand returns the number of key's items in hand.
func (g *given) inHand(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if k := g.keys[key]; k != nil {
		return len(k.ids)
	}
	return 0
}

// has reports whether item id of key is in hand.
func (g *given) has(key, id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.keys[key]
	if k == nil {
		return false
	}
	_, ok := k.ids[id]
	return ok
}

// add records items, handed for key by an answer that arrived.
func (g *given) add(key string, items []cluster.InboxItem) {
	if len(items) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.keys == nil {
		g.keys = map[string]*givenKey{}
	}
	k := g.keys[key]
	if k == nil {
		k = &givenKey{since: "0", ids: map[string]struct{}{}}
		g.keys[key] = k
	}
	for _, it := range items {
		k.ids[it.ID] = struct{}{}
		if idAfter(it.ID, k.since) {
			k.since = it.ID
		}
	}
}

// ended records that item id of key left the stream (acknowledged or set
// aside by this process).
func (g *given) ended(key, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.keys[key]
	if k == nil {
		return
	}
	delete(k.ids, id)
	if len(k.ids) == 0 {
		delete(g.keys, key)
	}
}

// forget drops what is remembered of key and returns the ids that were
// in hand.
func (g *given) forget(key string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := g.keys[key]
	if k == nil {
		return nil
	}
	delete(g.keys, key)
	ids := make([]string, 0, len(k.ids))
	for id := range k.ids {
		ids = append(ids, id)
	}
	return ids
}

// idAfter reports whether stream id a comes after b ("ms-seq"; "0" is
// before every id).
func idAfter(a, b string) bool {
	am, as := splitID(a)
	bm, bs := splitID(b)
	return am > bm || (am == bm && as > bs)
}

// splitID reads a stream id's two numbers (0 for what is missing).
func splitID(id string) (ms, seq uint64) {
	m, s, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(m, 10, 64)
	seq, _ = strconv.ParseUint(s, 10, 64)
	return ms, seq
}
