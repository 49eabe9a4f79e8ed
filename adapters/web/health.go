package web

import (
	"errors"
	"net/http"
	"sync"

	"github.com/pibot/pibot/chat"
)

// health is what the page's header shows beside "connected": "" while
// pibot takes messages, else a few words from the gateway
// (chat.HealthShower), such as "storage unavailable, retrying". Every
// change wakes the event streams, which send it as a {"type":"health"}
// event (not kept in any conversation log: a stream starts with the
// problem if there is one, then sends each change).
type health struct {
	mu      sync.Mutex
	problem string
	subs    map[chan struct{}]struct{}
}

// set records problem and wakes the streams if it changed.
func (h *health) set(problem string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.problem == problem {
		return
	}
	h.problem = problem
	for w := range h.subs {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// get returns the problem shown now.
func (h *health) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.problem
}

// subscribe has wake woken on every change until the returned func is
// called.
func (h *health) subscribe(wake chan struct{}) (unsubscribe func()) {
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[chan struct{}]struct{}{}
	}
	h.subs[wake] = struct{}{}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		delete(h.subs, wake)
		h.mu.Unlock()
	}
}

// ShowHealth implements chat.HealthShower: the page's header shows
// problem ("" clears it) in every browser connected to this process.
func (a *Adapter) ShowHealth(problem string) { a.api.health.set(problem) }

// The words a browser shows beside a message the gateway did not take
// (the page prefixes "Not delivered: " and adds Retry, which sends it
// again under the same id: a copy that was taken after all is recognised
// and not taken twice). They never carry the error's text, which the log
// has.
const (
	refusedUnavailable = "pibot's storage is unavailable right now, so it could not take this message. Press Retry in a moment."
	refusedStopped     = "pibot is not running its web chat right now (it may be starting or stopping). Press Retry in a moment."
	refusedOther       = "pibot could not take this message because of an internal error (its log has the details). Press Retry to send it again."
)

// refusal returns the words for a message refused with err and its
// HTTP status.
func refusal(err error) (words string, status int) {
	switch {
	case errors.Is(err, chat.ErrUnavailable):
		return refusedUnavailable, http.StatusServiceUnavailable
	case errors.Is(err, errNotRunning):
		return refusedStopped, http.StatusServiceUnavailable
	default:
		return refusedOther, http.StatusInternalServerError
	}
}
