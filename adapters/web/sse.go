package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// heartbeat keeps idle event streams (and proxies) alive.
const heartbeat = 15 * time.Second

// handleEvents streams a conversation's events as Server-Sent Events. The
// stream starts with every kept event after the client's Last-Event-ID
// (header, or "last" query parameter for a fresh EventSource), then a
// {"type":"ready"} marker, then live events. A client whose last id comes
// from an earlier process gets {"type":"reset"} and the whole log.
func (a *api) handleEvents(w http.ResponseWriter, r *http.Request) {
	convID := r.URL.Query().Get("conv")
	if !validID(convID) {
		http.Error(w, "bad conversation id", http.StatusBadRequest)
		return
	}
	a.feeder.waitStarted(r.Context())
	stop := a.feeder.running()
	if stop == nil {
		http.Error(w, errNotRunning.Error(), http.StatusServiceUnavailable)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last")
	}
	cursor, ok := a.store.parseEventID(last)
	reset := last != "" && !ok

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's write timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	wake := make(chan struct{}, 1)
	defer a.health.subscribe(wake)()
	a.store.mu.Lock()
	a.store.conv(convID).subs[wake] = struct{}{}
	a.store.mu.Unlock()
	defer func() {
		a.store.mu.Lock()
		if l := a.store.convs[convID]; l != nil {
			delete(l.subs, wake)
		}
		a.store.mu.Unlock()
	}()

	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return
	}
	if reset {
		if _, err := fmt.Fprint(w, "data: {\"type\":\"reset\"}\n\n"); err != nil {
			return
		}
	}
	ready, shown := false, ""
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	for {
		a.store.mu.Lock()
		var evs []event
		if l := a.store.convs[convID]; l != nil {
			evs = l.since(cursor)
		}
		a.store.mu.Unlock()
		for _, ev := range evs {
			if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", a.store.eventID(ev.seq), ev.data); err != nil {
				return
			}
			cursor = ev.seq
		}
		if problem := a.health.get(); problem != shown {
			// Not a logged event (no id): a stream starts with the
			// problem if there is one (none is the page's default on a
			// new stream), then each change.
			shown = problem
			b, _ := json.Marshal(map[string]string{"type": "health", "problem": problem})
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
		}
		if !ready {
			ready = true
			if _, err := fmt.Fprint(w, "data: {\"type\":\"ready\"}\n\n"); err != nil {
				return
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			return
		case <-wake:
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
		}
	}
}
