// Package webtest holds fakes for the web chat's tests: Hub, an
// in-process bus that several web adapters share as cluster replicas
// share a Redis pub/sub channel.
package webtest

import (
	"context"
	"errors"
	"sync"
)

// Hub is an in-process web.Bus: every payload published goes to every
// subscriber of that moment, the publisher's own subscription included,
// in the order published. Unlike Redis it loses nothing while subscribed,
// but a subscriber that falls behind by more than its buffer makes
// Publish wait. While cut (Cut), payloads published are lost, as they are
// while a Redis subscription reconnects.
type Hub struct {
	mu   sync.Mutex
	subs map[chan []byte]struct{}
	cut  bool
	// published counts the payloads published, lost ones included.
	published int
}

// NewHub returns a hub without subscribers.
func NewHub() *Hub { return &Hub{subs: map[chan []byte]struct{}{}} }

// subBuffer is how many payloads wait for a slow subscriber.
const subBuffer = 1024

// Publish hands payload to every subscriber (none while cut).
func (h *Hub) Publish(ctx context.Context, payload []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.published++
	if h.cut {
		return nil
	}
	p := append([]byte(nil), payload...)
	for ch := range h.subs {
		select {
		case ch <- p:
		case <-ctx.Done():
			return errors.New("webtest: publish: subscriber too slow")
		}
	}
	return nil
}

// Subscribe calls deliver with every payload published until ctx ends,
// then returns nil.
func (h *Hub) Subscribe(ctx context.Context, deliver func(payload []byte)) error {
	ch := make(chan []byte, subBuffer)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.subs, ch)
		h.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-ch:
			deliver(p)
		}
	}
}

// Subscribers returns how many subscriptions are open.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Published returns how many payloads were published, lost ones included.
func (h *Hub) Published() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.published
}

// Cut loses every payload published from now on while on is true.
func (h *Hub) Cut(on bool) {
	h.mu.Lock()
	h.cut = on
	h.mu.Unlock()
}
