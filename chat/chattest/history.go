package chattest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/pibot/pibot/chat"
)

// History is a fake chat.History bound to one platform, as the gateway's
// is: it serves the conversations and transcripts it is given and refuses
// conversations of another platform.
type History struct {
	platform chat.Platform

	mu     sync.Mutex
	convs  []chat.ConvSummary
	trans  map[string]chat.Transcript // by main-line conversation key
	err    error
	served []chat.ConvRef
}

var _ chat.History = (*History)(nil)

// NewHistory returns an empty History of platform.
func NewHistory(platform chat.Platform) *History {
	return &History{platform: platform, trans: map[string]chat.Transcript{}}
}

// Add sets the transcript of sum.Conv and lists it as a conversation
// (replacing what an earlier Add said about it).
func (h *History) Add(sum chat.ConvSummary, t chat.Transcript) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum.Conv.Thread = ""
	key := sum.Conv.Key()
	h.convs = slices.DeleteFunc(h.convs, func(c chat.ConvSummary) bool { return c.Conv.Key() == key })
	h.convs = append(h.convs, sum)
	h.trans[key] = t
}

// Fail makes every later call return err (nil: succeed again).
func (h *History) Fail(err error) {
	h.mu.Lock()
	h.err = err
	h.mu.Unlock()
}

// Served returns the conversations Transcript was asked for.
func (h *History) Served() []chat.ConvRef {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chat.ConvRef(nil), h.served...)
}

// Conversations implements chat.History: most recently updated first.
func (h *History) Conversations(_ context.Context, limit int) ([]chat.ConvSummary, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	out := append([]chat.ConvSummary(nil), h.convs...)
	slices.SortStableFunc(out, func(a, b chat.ConvSummary) int { return b.Updated.Compare(a.Updated) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Transcript implements chat.History.
func (h *History) Transcript(_ context.Context, conv chat.ConvRef) (chat.Transcript, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return chat.Transcript{}, h.err
	}
	if conv.Platform != h.platform {
		return chat.Transcript{}, fmt.Errorf("chattest: history: %s is not a %s conversation", conv.Key(), h.platform)
	}
	conv.Thread = ""
	h.served = append(h.served, conv)
	return h.trans[conv.Key()], nil
}
