package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
)

// Bus carries the web chat's events between the replicas of a cluster,
// so that a browser connected to one replica sees the replies another
// replica writes (cluster mode: cluster/rediscluster.Topic). Publish
// sends a payload to every subscriber; Subscribe calls deliver with each
// payload published, the subscriber's own included, until ctx ends.
// Delivery may be lossy (a subscription reconnecting misses what is
// published meanwhile) but keeps each publisher's order.
type Bus interface {
	Publish(ctx context.Context, payload []byte) error
	Subscribe(ctx context.Context, deliver func(payload []byte)) error
}

// Bounds of the relay.
const (
	// relayQueue is how many events wait to be published; beyond it
	// events are dropped (the browsers of other replicas miss them until
	// a reload rebuilds the conversation).
	relayQueue = 1024
	// publishTimeout bounds one publish, and the flush when Run ends.
	publishTimeout = 2 * time.Second
	// maxNoticeText bounds a relayed status line or toast, in bytes.
	maxNoticeText = 4096
)

// relayed is one event on the bus: a message's current state (new or
// changed) or a notice, in conversation Conv.
type relayed struct {
	// From is the epoch of the adapter that published it: an adapter
	// skips its own events, which it applied when it made them.
	From   string   `json:"from"`
	Conv   string   `json:"conv"`
	Msg    *message `json:"msg,omitempty"`
	Notice *notice  `json:"notice,omitempty"`
}

// relay publishes what this adapter writes to its conversation logs on
// the bus, and applies to the logs what the other replicas' adapters
// publish, so that every replica's browsers see every reply. Without a
// bus it does nothing. Its publisher and subscriber run while Run does.
type relay struct {
	bus   Bus // nil: one process, nothing to relay
	store *convStore
	log   *slog.Logger
	queue chan []byte

	running atomic.Bool
	// dropping is set while the queue is full (one warning per streak).
	dropping atomic.Bool
}

func newRelay(bus Bus, store *convStore, log *slog.Logger) *relay {
	r := &relay{bus: bus, store: store, log: log}
	if bus != nil {
		r.queue = make(chan []byte, relayQueue)
	}
	return r
}

// messageLocked publishes m's current state; store.mu is held, so the
// bus carries one adapter's events in the order of its logs.
func (r *relay) messageLocked(conv string, m *message) {
	if r.bus != nil {
		r.enqueue(relayed{From: r.store.epoch, Conv: conv, Msg: m})
	}
}

// noticeLocked publishes a status line or toast; store.mu is held.
func (r *relay) noticeLocked(conv string, n notice) {
	if r.bus != nil {
		r.enqueue(relayed{From: r.store.epoch, Conv: conv, Notice: &n})
	}
}

// enqueue encodes ev at once (its message may change after store.mu is
// released) and queues it for the publisher.
func (r *relay) enqueue(ev relayed) {
	data, err := json.Marshal(ev)
	if err != nil {
		r.log.Warn("web chat: relay: encode", "err", err)
		return
	}
	select {
	case r.queue <- data:
		r.dropping.Store(false)
	default:
		if !r.dropping.Swap(true) {
			r.log.Warn("web chat: relay queue full; events are not published to the other replicas")
		}
	}
}

// run publishes the queued events and applies the other replicas' until
// ctx ends; then it publishes what is still queued (for at most
// publishTimeout) and returns. Only one run is active at a time.
func (r *relay) run(ctx context.Context) {
	if r.bus == nil || !r.running.CompareAndSwap(false, true) {
		return
	}
	defer r.running.Store(false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.bus.Subscribe(ctx, r.apply); err != nil && ctx.Err() == nil {
			r.log.Warn("web chat: relay: subscribe", "err", err)
		}
	}()
	r.publish(ctx)
	<-done
}

// publish sends the queued events, in order, until ctx ends, then
// flushes the queue.
func (r *relay) publish(ctx context.Context) {
	failing := false
	send := func(ctx context.Context, data []byte) {
		cctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := r.bus.Publish(cctx, data)
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			failing = true
			r.log.Warn("web chat: relay: publish failed; the other replicas' browsers miss events until it works again", "err", err)
		case err == nil && failing:
			failing = false
			r.log.Info("web chat: relay: publishing again")
		}
	}
	for {
		select {
		case data := <-r.queue:
			send(ctx, data)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
			defer cancel()
			for fctx.Err() == nil && len(r.queue) > 0 {
				send(fctx, <-r.queue)
			}
			return
		}
	}
}

// apply writes an event another replica published to the conversation
// logs, which push it to this replica's browsers of that conversation
// (each event stream serves one conversation, behind the API's token and
// host checks). Events that are malformed are dropped.
func (r *relay) apply(payload []byte) {
	var ev relayed
	if err := json.Unmarshal(payload, &ev); err != nil {
		r.log.Warn("web chat: relay: bad event", "err", err)
		return
	}
	if ev.From == r.store.epoch {
		return
	}
	if !validID(ev.Conv) || (ev.Msg == nil) == (ev.Notice == nil) {
		r.log.Warn("web chat: relay: bad event", "conv", ev.Conv)
		return
	}
	r.store.mu.Lock()
	defer r.store.mu.Unlock()
	if ev.Msg != nil {
		m := ev.Msg
		if !validRelayedMsg(m) {
			r.log.Warn("web chat: relay: bad message", "conv", ev.Conv)
			return
		}
		m.Type = "msg"
		l := r.store.conv(ev.Conv)
		if cur := l.msgs[m.ID]; cur != nil {
			*cur = *m
			l.update(cur)
			return
		}
		l.add(m)
		return
	}
	n := ev.Notice
	if (n.Thread != "" && !validID(n.Thread)) || len(n.Text) > maxNoticeText {
		r.log.Warn("web chat: relay: bad notice", "conv", ev.Conv)
		return
	}
	switch n.Type {
	case "status":
		since := time.Now().UTC()
		if n.Since != nil {
			since = *n.Since
		}
		r.store.conv(ev.Conv).showStatus(n.Thread, n.Text, since)
	case "toast":
		r.store.conv(ev.Conv).toast(n.Thread, n.Text)
	default:
		r.log.Warn("web chat: relay: bad notice", "conv", ev.Conv, "type", n.Type)
	}
}

// validRelayedMsg checks a message another replica published.
func validRelayedMsg(m *message) bool {
	id := m.ID
	if rest, ok := strings.CutPrefix(id, "u-"); ok {
		id = rest
	}
	switch {
	case !validID(id), m.Thread != "" && !validID(m.Thread):
		return false
	case m.From != fromUser && m.From != fromBot:
		return false
	case len(m.Text) > maxInboundText, len(m.Error) > maxNoticeText:
		return false
	case m.ReplyTo != nil && m.ReplyTo.ID == "":
		return false
	}
	return true
}
