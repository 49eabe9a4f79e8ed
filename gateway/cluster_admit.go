package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/internal/otlp"
)

// direct returns the item in becomes when it is enqueued as it came: a
// button press, a command that acts on a session, or a message with
// something in it, in a conversation that opens no thread. Anything else
// (a thread to open, a command answered at intake, /steer) takes the
// steps of sink, which decide the item on the way.
func (i *intake) direct(in chat.Inbound, trace string) (inboxItem, bool) {
	item := inboxItem{In: in, Trace: trace}
	switch {
	case i.threads.wantsThread(in):
		return item, false
	case in.Kind == chat.KindAction && in.Action != nil:
		item.Kind = itemPress
	case in.Command != nil:
		if !i.commands.needsSession(in.Command.Name) {
			return item, false
		}
		item.Kind = itemCommand
	case in.Text == "" && len(in.Files) == 0:
		return item, false
	}
	return item, true
}

// admitDirect admits the direct item of in in one round trip (adm, the
// shared admission): what sink does with its dedupe, budget and enqueue
// steps, with the same answers. A duplicate or an event over its sender's
// budget never becomes an item.
func (i *intake) admitDirect(ctx context.Context, adm admission, in chat.Inbound, item inboxItem, span *otlp.Span) error {
	data, err := json.Marshal(item)
	if err != nil {
		return fmt.Errorf("gateway: encode inbound: %w", err)
	}
	ad := cluster.Admission{Dedupe: in.DedupKey, Key: in.Conv.Key(), Data: data}
	if i.budgeted(in) {
		ad.Budget = budgetKey(in)
	}
	res, err := adm.admit(ctx, ad, item)
	if err == nil && res.ID != "" {
		crashpoint.Hit(crashpoint.InboxAppend)
	}
	if errors.Is(err, cluster.ErrInFlight) {
		// Another delivery's pending key (Seen, not committed): refused
		// for now, nothing forgotten.
		return i.inFlight(in, span, err)
	}
	if err != nil {
		// Refused: the platform delivers it again. The answer may have
		// been lost after the item was enqueued: then the dedupe key
		// records the item's id and Forget keeps it (rediscluster), so
		// the redelivery is a duplicate and the item is answered; else
		// it is forgotten and the redelivery taken.
		i.outage.report(i.log, "admit: event refused", err)
		_ = i.forget(ctx, in.DedupKey)
		i.shared.sharedDown(ctx, in)
		span.Fail(err)
		return fmt.Errorf("gateway: admit: %w: %w", chat.ErrUnavailable, err)
	}
	i.outage.ok()
	switch {
	case res.Dup:
		i.log.Debug("duplicate event dropped", "key", in.DedupKey)
	case res.Wait > 0:
		i.withinBudget(ctx, in, &res.Wait) // the notice
	}
	return nil
}

// admit admits ad, whose data encodes item, through the shared store
// (store) and hands on what it enqueued: when this replica holds the
// session of ad.Key, the same round trip takes the key's new items (and
// those earlier takes whose answers were lost took), which go to their
// mailbox at once under the key's gate, as the pump's own takes do, so
// they keep the inbox's order (item itself among them, not decoded
// again); otherwise the pump is kicked, as for an Enqueue. A failed take
// has the pump take the key again soon (resyncs).
func (p *pump) admit(ctx context.Context, ad cluster.Admission, item inboxItem) (cluster.Admitted, error) {
	if p.sessions.cached(ad.Key) != nil {
		defer p.gate.lock(ad.Key)()
		// Asked again under the gate: the pump may have let the session
		// go meanwhile.
		o := p.sessions.cached(ad.Key)
		ad.Take = o != nil
		// An item its location executes at once has its work begun by
		// the same round trip (a crash then counts against it).
		ad.Run = ad.Take && !p.busy(ad.Key) && o.idleAt(ad.Key)
	}
	res, err := p.store.Admit(ctx, ad)
	if err != nil && ad.Take {
		// The script may have run, its answer lost: it then took the
		// key's items, other replicas' too, which only a take of the
		// key hands over; the conversation may go quiet meanwhile.
		p.resync.request(ad.Key)
	}
	if err != nil || res.ID == "" {
		return res, err
	}
	if ad.Take {
		if len(res.Taken) > 0 {
			crashpoint.Hit(crashpoint.PumpHandoff)
		}
		// The admission recorded its item's work begun when it took it
		// alone.
		begun := ad.Run && len(res.Taken) == 1 && res.Taken[0].ID == res.ID
		p.hand(ctx, res.Taken, false, &ownItem{id: res.ID, begun: begun, item: item})
	} else {
		p.kick(ad.Key)
	}
	return res, nil
}

// ownItem is an admission's own item among those it took: its id,
// whether the admission recorded its work begun (cluster.Admission.Run),
// and the item as the intake decided it.
type ownItem struct {
	id    string
	begun bool
	item  inboxItem
}

// keyGate serialises, per key, taking a key's items from the inbox and
// posting them to its mailbox: the pump and the intake both take items,
// and the mailbox must get them in the order the inbox gave them.
type keyGate struct {
	mu   sync.Mutex
	keys map[string]*gateEntry
}

// gateEntry is one key's lock and the number of its holders and waiters.
type gateEntry struct {
	mu sync.Mutex
	n  int
}

// lock takes key's gate and returns its release.
func (g *keyGate) lock(key string) (unlock func()) {
	g.mu.Lock()
	if g.keys == nil {
		g.keys = map[string]*gateEntry{}
	}
	e := g.keys[key]
	if e == nil {
		e = &gateEntry{}
		g.keys[key] = e
	}
	e.n++
	g.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		g.mu.Lock()
		defer g.mu.Unlock()
		if e.n--; e.n == 0 {
			delete(g.keys, key)
		}
	}
}
