package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Health returns nil while the gateway can write its data directory, else
// why not (for /readyz).
func (g *Gateway) Health() error {
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	if g.health.err == nil {
		return nil
	}
	return fmt.Errorf("cannot write the data directory since %s: %w", g.health.since.Format(time.RFC3339), g.health.err)
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

// lostToStorage reports whether err, from o, is due to a failed write:
// itself a storage error, or any error of a session whose writer a failed
// write fenced (it may have been closed since).
func (o *owner) lostToStorage(err error) bool {
	if err == nil {
		return false
	}
	if storageError(err) {
		return true
	}
	f := o.sess.Fenced()
	return f != nil && !errors.Is(f, errLeaseLost)
}

// storageFailed records a failed write. o, if set, is the owner whose
// session failed: a session whose writer is fenced by an I/O error is
// unloaded, so the next message opens (and repairs) the file again.
func (g *Gateway) storageFailed(o *owner, err error) {
	if o == nil && err == nil {
		return
	}
	if o != nil && !storageError(err) {
		return
	}
	g.health.mu.Lock()
	if g.health.err == nil {
		g.health.since = time.Now()
		g.log.Error("storage write failed; refusing new messages until it works again", "err", err)
	}
	g.health.err = err
	g.health.mu.Unlock()
	if o == nil {
		return
	}
	if fenced := o.sess.Fenced(); fenced == nil || errors.Is(fenced, errLeaseLost) {
		return
	}
	g.mu.Lock()
	mine := g.owners[o.path] == o
	if mine {
		delete(g.owners, o.path)
	}
	g.mu.Unlock()
	if mine {
		// Not under the caller's locks; its runs then stop writing.
		g.track(func(context.Context) { o.close() })
	}
}

// strand keeps messages whose run could not be recorded; they are routed
// again once the disk works.
func (g *Gateway) strand(ps []*pending) {
	if len(ps) == 0 {
		return
	}
	g.health.mu.Lock()
	defer g.health.mu.Unlock()
	for _, p := range ps {
		g.health.stranded = append(g.health.stranded, &pending{item: p.item, inboxID: p.inboxID, extra: p.extra})
	}
}

// storageDown tells the sender of in, at most once per noticeEvery per
// conversation, that the message was not taken.
func (g *Gateway) storageDown(ctx context.Context, in chat.Inbound) {
	if in.Kind != chat.KindMessage {
		return
	}
	key := in.Conv.Key()
	now := time.Now()
	g.health.mu.Lock()
	if g.health.told == nil {
		g.health.told = map[string]time.Time{}
	}
	last, seen := g.health.told[key]
	if !seen || now.Sub(last) >= noticeEvery {
		g.health.told[key] = now
	}
	g.health.mu.Unlock()
	if seen && now.Sub(last) < noticeEvery {
		return
	}
	g.replier.reply(ctx, in, "⚠️ I cannot store messages right now (the server's disk is full or failing), so I did not take this one. It is taken once storage works again if your chat app delivers it again; if you get no answer, send it again later.")
}

// probeLoop tries the disk again while the gateway is degraded, until ctx
// ends.
func (g *Gateway) probeLoop(ctx context.Context) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.health.mu.Lock()
		degraded := g.health.err != nil
		g.health.mu.Unlock()
		if degraded {
			g.probe(ctx)
		}
	}
}

// syncer is an inbox that can be made durable and recovered after a
// failed write (cluster.Inbox).
type syncer interface{ Sync() error }

// probe writes the data directory: the inbox and the index (which recover
// after a failed write) and a probe file. If all works, the gateway is
// healthy again and routes the stranded messages.
func (g *Gateway) probe(ctx context.Context) {
	var err error
	if s, ok := g.inbox.(syncer); ok {
		err = s.Sync()
	}
	err = errors.Join(err, g.index.Sync(ctx), probeWrite(g.cfg.DataDir))
	g.health.mu.Lock()
	if err != nil {
		g.health.err = err
		g.health.mu.Unlock()
		return
	}
	down := time.Since(g.health.since)
	g.health.err = nil
	stranded := g.health.stranded
	g.health.stranded = nil
	g.health.told = nil
	g.health.mu.Unlock()
	g.log.Info("storage works again; taking messages", "down", down.Round(time.Millisecond), "stranded", len(stranded))
	pending := map[string]bool{}
	items, err := g.inbox.Pending(ctx)
	if err != nil {
		// The stranded messages stay in the inbox: the next start replays them.
		g.log.Error("inbox: list accepted messages; stranded ones wait for a restart", "err", err)
	}
	for _, it := range items {
		pending[it.ID] = true
	}
	for _, p := range stranded {
		// A message the inbox let go (refused, or answered since) is not
		// taken up again.
		if pending[p.inboxID] {
			g.mail.post(p.item.In.Conv.Key(), func() { g.route(g.runContext(), p) })
		}
	}
}

// probeWrite writes, syncs and removes a probe file of probeSize bytes.
func probeWrite(dir string) error {
	p := filepath.Join(dir, ".probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("gateway: probe: %w", err)
	}
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
