package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/session"
)

// health tracks whether pibot can write its data directory. A failed write
// (a full disk) makes it degraded: Health reports it, new messages are
// refused (the platform is not acknowledged), and a probe tries the disk
// again every probeInterval. When a probe succeeds, the messages whose
// runs failed meanwhile are routed again.
type health struct {
	log     *slog.Logger
	replier *replier
	inbox   Inbox
	index   Index
	dataDir string
	// unload unloads o if it is still the loaded owner of its session,
	// closing it off the caller's locks.
	unload func(o *owner)
	// reroute routes a stranded message again, on its location's mailbox.
	reroute func(p *pending)

	mu       sync.Mutex
	err      error // the failure while degraded; nil when healthy
	since    time.Time
	stranded []*pending
	told     map[string]time.Time // conversation -> last "cannot store" notice
}

// probeInterval is how often a degraded gateway tries the disk again.
const probeInterval = 500 * time.Millisecond

// noticeEvery is the least time between two "cannot store" notices in a
// conversation (a platform that redelivers would repeat them).
const noticeEvery = time.Minute

// probeSize is written and fsynced by a probe: a disk with less free room
// is still full for pibot.
const probeSize = 16 << 10

// check returns nil while the data directory can be written, else why not.
func (h *health) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		return nil
	}
	return fmt.Errorf("cannot write the data directory since %s: %w", h.since.Format(time.RFC3339), h.err)
}

// storageError reports whether err is a failed write of the data
// directory, not a lost lease or a closed session.
func storageError(err error) bool {
	var fe *session.FencedError
	if errors.As(err, &fe) {
		return !errors.Is(fe.Cause, errLeaseLost)
	}
	// A failed write of the location index.
	return errors.Is(err, cluster.ErrWrite)
}

// lostToStorage reports whether err, from the session s, is due to a failed write:
// itself a storage error, or any error of a session whose writer a failed
// write fenced (it may have been closed since).
func lostToStorage(s *session.Session, err error) bool {
	if err == nil {
		return false
	}
	if storageError(err) {
		return true
	}
	f := s.Fenced()
	return f != nil && !errors.Is(f, errLeaseLost)
}

// storageFailed records a failed write. o, if set, is the owner whose
// session failed: a session whose writer is fenced by an I/O error is
// unloaded, so the next message opens (and repairs) the file again.
func (h *health) storageFailed(o *owner, err error) {
	if o == nil && err == nil {
		return
	}
	if o != nil && !storageError(err) {
		return
	}
	h.mu.Lock()
	if h.err == nil {
		h.since = time.Now()
		h.log.Error("storage write failed; refusing new messages until it works again", "err", err)
	}
	h.err = err
	h.mu.Unlock()
	if o == nil {
		return
	}
	if fenced := o.sess.Fenced(); fenced == nil || errors.Is(fenced, errLeaseLost) {
		return
	}
	h.unload(o)
}

// strand keeps messages whose run could not be recorded because of err;
// they are routed again once the disk works. Only a probe routes them, and
// it runs only while the gateway is degraded, so strand makes it degraded
// again if a probe found the disk writable since the failure was recorded
// (storageFailed runs first, often on another path: a probe in between
// would otherwise leave these messages stranded while Health said all was
// well, unanswered until a restart).
func (h *health) strand(err error, ps []*pending) {
	if len(ps) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil {
		h.err, h.since = err, time.Now()
	}
	for _, p := range ps {
		h.stranded = append(h.stranded, &pending{item: p.item, inbox: p.inbox, extra: p.extra})
	}
}

// storageDown tells the sender of in, at most once per noticeEvery per
// conversation, that the message was not taken.
func (h *health) storageDown(ctx context.Context, in chat.Inbound) {
	if in.Kind != chat.KindMessage {
		return
	}
	md := "⚠️ I cannot store messages right now (the server's disk is full or failing), so I did not take this one. Please send it again later."
	switch r := h.replier.redelivery(in); {
	case r == chat.ShowsRefusal:
		return // the adapter shows it beside the message
	case r == chat.Redelivers && in.Interaction == nil:
		md = "⚠️ I cannot store messages right now (the server's disk is full or failing), so I did not take this one yet: your chat app delivers it to me again for a while. If you get no answer, please send it again later."
	}
	key := in.Conv.Key()
	now := time.Now()
	h.mu.Lock()
	if h.told == nil {
		h.told = map[string]time.Time{}
	}
	last, seen := h.told[key]
	if !seen || now.Sub(last) >= noticeEvery {
		h.told[key] = now
	}
	h.mu.Unlock()
	if seen && now.Sub(last) < noticeEvery {
		return
	}
	h.replier.reply(ctx, in, md)
}

// probeLoop tries the disk again while the gateway is degraded, until ctx
// ends.
func (h *health) probeLoop(ctx context.Context) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		degraded := h.err != nil
		h.mu.Unlock()
		if degraded {
			h.probe(ctx)
		}
	}
}

// probe writes the data directory: the inbox and the index (which recover
// after a failed write) and a probe file. If all works, the gateway is
// healthy again and routes the stranded messages.
func (h *health) probe(ctx context.Context) {
	var err error
	if s, ok := h.inbox.(cluster.Syncer); ok {
		err = s.Sync()
	}
	err = errors.Join(err, h.index.Sync(ctx), probeWrite(h.dataDir))
	h.mu.Lock()
	if err != nil {
		h.err = err
		h.mu.Unlock()
		return
	}
	down := time.Since(h.since)
	h.err = nil
	stranded := h.stranded
	h.stranded = nil
	h.told = nil
	h.mu.Unlock()
	h.log.Info("storage works again; taking messages", "down", down.Round(time.Millisecond), "stranded", len(stranded))
	for _, p := range stranded {
		// A message the inbox let go (refused, or answered since) is not
		// taken up again.
		items, err := h.inbox.Pending(ctx, p.inbox.key)
		if err != nil {
			// It stays in the inbox: the next start replays it.
			h.log.Error("inbox: list accepted messages; a stranded one waits for a restart", "err", err)
			continue
		}
		if slices.ContainsFunc(items, func(it cluster.InboxItem) bool { return it.ID == p.inbox.id }) {
			h.reroute(p)
		}
	}
}

// probeWrite writes, syncs and removes a probe file of probeSize bytes,
// named apart from the probes of other replicas sharing dir.
func probeWrite(dir string) error {
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("gateway: probe: %w", err)
	}
	p := f.Name()
	_, err = f.Write(make([]byte, probeSize))
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close(), os.Remove(p))
	if err != nil {
		return fmt.Errorf("gateway: probe: %w", err)
	}
	return nil
}
