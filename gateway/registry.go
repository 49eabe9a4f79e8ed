package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/session"
)

// registry holds the loaded session owners, one per session file: it
// finds the owner and location of an event (loading the session under its
// lease, or creating one), and unloads idle owners.
type registry struct {
	cfg     *Config // the gateway's, read-only
	agents  agents
	log     *slog.Logger
	index   Index
	locker  Locker
	holder  string // names this process in lease markers (host/pid)
	metrics *Metrics
	// files stores the session files (Deps.SessionFiles).
	files session.Storage
	// indexes keeps the indexes of large sessions evicted, so that their
	// next load reads only what was appended (nil: none kept).
	indexes *session.Indexes
	// newOwner builds the owner of a session just loaded (the gateway
	// wires its collaborators).
	newOwner func(path string, s *session.Session, lease cluster.Lease) *owner

	mu     sync.Mutex
	owners map[string]*owner // by session path
	// closing: the owners unloaded whose close has not ended, by session
	// path (their lease is still held; see owner).
	closing map[string]*owner
	// located: in cluster mode, the loaded owner each location was found
	// bound to (cluster_located.go).
	located  locatedCache
	watchers sync.WaitGroup // lease watchers, one per loaded owner
}

// forget removes o from the loaded owners if it is still the owner of its
// path, and says whether it was.
func (reg *registry) forget(o *owner) bool {
	reg.mu.Lock()
	mine := reg.owners[o.path] == o
	if mine {
		reg.unloadLocked(o)
	}
	reg.mu.Unlock()
	if mine {
		reg.located.forgetOwners(o)
	}
	return mine
}

// cached returns the loaded owner that location key was last found bound
// to (located), if it is still loaded and its lease alive; nil otherwise.
// Like owner, it touches the owner it returns, under reg.mu, so it is not
// unloaded as idle before the caller uses it.
func (reg *registry) cached(key string) *owner {
	o := reg.located.lookup(key)
	if o == nil {
		return nil
	}
	reg.mu.Lock()
	loaded := reg.owners[o.path] == o
	if loaded {
		o.touch()
	}
	reg.mu.Unlock()
	if !loaded {
		// Unloaded since (or remembered while it was being unloaded).
		reg.located.forgetOwners(o)
		return nil
	}
	return o
}

// freezeAll freezes every loaded owner's runs with note.
func (reg *registry) freezeAll(note string) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, o := range reg.owners {
		o.freezeAll(note)
	}
}

// activeRuns counts the active runs of every loaded owner.
func (reg *registry) activeRuns() int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	n := 0
	for _, o := range reg.owners {
		n += o.activeRuns()
	}
	return n
}

// closeAll unloads and closes every owner and waits for their lease
// watchers.
func (reg *registry) closeAll() {
	reg.mu.Lock()
	owners := make([]*owner, 0, len(reg.owners))
	for _, o := range reg.owners {
		owners = append(owners, o)
	}
	for _, o := range owners {
		reg.unloadLocked(o)
	}
	reg.mu.Unlock()
	reg.located.reset()
	for _, o := range owners {
		o.close()
	}
	reg.watchers.Wait()
}

// locate finds (or creates) the owner and location for an inbound event,
// applying the branching rules: a reply to an earlier message of the same
// location moves its head there (see branchPoint); a new thread on a
// message starts a location whose first head is that message's entry.
func (reg *registry) locate(ctx context.Context, in chat.Inbound) (*owner, *location, error) {
	key := in.Conv.Key()
	shared := reg.cfg.Cluster.Enabled
	if shared {
		if o := reg.cached(key); o != nil { // held here: no index round trip
			return o, o.place(key, in), nil
		}
	}
	path, ok, err := reg.index.Get(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: index: %w", err)
	}
	if ok {
		o, err := reg.owner(ctx, path, &in)
		if err == nil {
			if shared {
				reg.located.remember(key, o)
			}
			return o, o.place(key, in), nil
		}
		if reg.cfg.Cluster.Enabled || !fileLost(err) {
			// Another replica holds it, Redis cannot say, or the file
			// cannot be read now: a second session file would fork the
			// conversation. The message stays in the inbox.
			return nil, nil, err
		}
		reg.log.Warn("session file of location gone or not a session; starting a new one", "loc", key, "path", path, "err", err)
	}
	// A new location: branch from the message it hangs off, if we know it.
	var parents []chat.MsgRef
	if in.ReplyTo != nil {
		parents = append(parents, *in.ReplyTo)
	}
	if in.Conv.Thread != "" {
		root := in.Conv
		root.Thread = ""
		parents = append(parents, chat.MsgRef{Conv: root, ID: in.Conv.Thread})
	}
	for _, ref := range parents {
		path, ok, err := reg.index.Get(ctx, ref.Conv.Key())
		if err != nil {
			return nil, nil, fmt.Errorf("gateway: index: %w", err)
		}
		if !ok {
			continue
		}
		o, err := reg.owner(ctx, path, nil)
		if err != nil {
			continue
		}
		// A thread hangs off the message itself: its first head is that
		// message's entry (docs/architecture.md, "Locations and branches").
		target, ok := o.tree().EntryForMsg(ref.Key())
		if !ok {
			continue
		}
		loc := o.location(key, in.Conv)
		// A location the file already has a head for (its binding was
		// lost in a crash) keeps that head.
		if _, known := o.tree().Head(key); !known {
			if err := o.moveHead(loc, target, session.SyncGrouped); err != nil {
				return nil, nil, err
			}
		}
		if err := reg.index.Bind(ctx, key, path); err != nil {
			return nil, nil, err
		}
		if shared {
			reg.located.remember(key, o)
		}
		return o, loc, nil
	}
	return reg.newSession(ctx, in.Conv, chooseAgent(reg.cfg, in))
}

// newSession creates a session file for a location, of the agent rec
// names: the header's cwd is its workspace, and (when bindings route
// sessions) a custom entry records the agent and why.
func (reg *registry) newSession(ctx context.Context, conv chat.ConvRef, rec agentRecord) (*owner, *location, error) {
	key := conv.Key()
	now := time.Now()
	path := filepath.Join(session.Dir(reg.cfg.DataDir, string(conv.Platform)),
		session.FileName(session.Timestamp(now), session.NewSessionID(now)))
	// Take the lease before the file exists, so even its first entries
	// carry the fence.
	// A new file: no fence to stay above yet.
	lease, err := reg.locker.Acquire(ctx, path, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: lease %s: %w", path, err)
	}
	crashpoint.Hit(crashpoint.Lease)
	// The binding is durable before the file exists (BeforeCreate): once
	// an entry of this conversation is on disk, a restart finds its file
	// instead of opening a second session and running a tool again. A
	// crash before the file exists leaves the binding: whoever loads the
	// location next creates the file there (owner).
	if err := reg.index.Bind(ctx, key, path); err != nil {
		release(ctx, reg.log, lease)
		return nil, nil, err
	}
	crashpoint.Hit(crashpoint.Bound)
	o, loc, err := reg.createSession(path, conv, rec, lease, true)
	if o == nil {
		release(ctx, reg.log, lease)
	}
	return o, loc, err
}

// createSession creates the session file at path (its header's id and
// time are the name's) for the location conv, under lease, and loads its
// owner. deferred leaves the file's creation to the session's first
// flush, off the message's path: until the run has ended and the session
// is fsynced, the inbox holds the message. That flush starts at once, on
// the group commit's goroutine (EagerCreate): left to the run, the first
// reply entry's write would create the file on the provider's stream and
// hold up the reply's tokens for its fsyncs (the index's, the file's, its
// directory's). Without an owner (an error before it was made) the caller
// still holds the lease; with one, the owner does.
func (reg *registry) createSession(path string, conv chat.ConvRef, rec agentRecord, lease cluster.Lease, deferred bool) (*owner, *location, error) {
	key := conv.Key()
	ts, id, ok := session.ParseFileName(path)
	if !ok {
		return nil, nil, fmt.Errorf("gateway: new session: %s is not a session file name", path)
	}
	name, ag := reg.agents.get(rec.Name)
	rec.Name = name
	h := session.Header{ID: id, Timestamp: ts, Cwd: ag.Workspace}
	first := session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: string(ag.Thinking), Pibot: &session.Meta{Loc: key}}
	if prov, id, ok := strings.Cut(ag.Model, "/"); ok {
		first = session.Entry{Type: session.TypeModelChange, Provider: prov, ModelID: id, Pibot: &session.Meta{Loc: key}}
	}
	opts := session.Options{Fence: lease.Fence(), Logger: reg.log, GroupWindow: reg.cfg.SessionGroupWindow}
	if deferred {
		opts.DeferCreate, opts.EagerCreate = true, true
		opts.BeforeCreate = func() error { return reg.index.Sync(context.Background()) }
	}
	s, err := session.Create(reg.files, filepath.Dir(path), h, first, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway: new session: %w", err)
	}
	o := reg.installOwner(path, s, lease)
	o.setAgent(rec, ag)
	if reg.cfg.Cluster.Enabled {
		reg.located.remember(key, o)
	}
	loc := o.location(key, conv)
	if first.Type == session.TypeModelChange {
		if _, err := o.append(loc, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: string(ag.Thinking)}, session.SyncGrouped); err != nil {
			return o, nil, err
		}
	}
	if reg.cfg.Route != nil {
		data, _ := json.Marshal(rec)
		if _, err := o.append(loc, session.Entry{Type: session.TypeCustom, CustomType: customAgent, Data: data}, session.SyncGrouped); err != nil {
			return o, nil, err
		}
	}
	return o, loc, nil
}

// absWorkspace returns dir made absolute, or as it is if that fails.
func absWorkspace(dir string) string {
	if w, err := filepath.Abs(dir); err == nil {
		return w
	}
	return dir
}

// owner returns the loaded owner of path, loading it if needed. Outside
// cluster mode it first waits for an unloaded owner of path to finish
// closing: only such an owner can hold the lease there, and failing to
// take it would make locate start a second session file for the
// conversation (a full disk unloads a failed owner while the next message
// arrives; an idle one can be evicted as it does). In cluster mode a held
// lease is answered at once (the item stays in the inbox): waiting there
// could wait for a close that waits for the caller's take of the key.
//
// unborn, when not nil, is the event that asks for the location bound to
// path: if the file does not exist (a crash came between its binding and
// its creation, see newSession), it is created there for that location,
// so the conversation keeps its one file and whoever takes it over is not
// stuck on a file that will never appear.
func (reg *registry) owner(ctx context.Context, path string, unborn *chat.Inbound) (*owner, error) {
	for {
		reg.mu.Lock()
		if o, ok := reg.owners[path]; ok {
			o.touch()
			reg.mu.Unlock()
			return o, nil
		}
		c := reg.closing[path]
		reg.mu.Unlock()
		if c == nil || reg.cfg.Cluster.Enabled {
			break
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("gateway: wait for %s to close: %w", path, ctx.Err())
		}
	}
	lease, seen, err := reg.acquireSession(ctx, path)
	if err != nil {
		// Another goroutine may be loading it right now.
		reg.mu.Lock()
		o, ok := reg.owners[path]
		reg.mu.Unlock()
		if ok {
			return o, nil
		}
		return nil, err
	}
	s, err := session.Open(reg.files, path, session.Options{Fence: lease.Fence(), Logger: reg.log, GroupWindow: reg.cfg.SessionGroupWindow,
		Lazy: true, Indexes: reg.indexes})
	if err != nil && unborn != nil && errors.Is(err, fs.ErrNotExist) {
		reg.log.Warn("the session file of a bound location was never created (a crash); creating it", "loc", unborn.Conv.Key(), "path", path)
		o, _, err := reg.createSession(path, unborn.Conv, chooseAgent(reg.cfg, *unborn), lease, false)
		if o == nil {
			release(ctx, reg.log, lease)
		}
		if err != nil {
			return nil, err
		}
		return o, nil
	}
	if err != nil {
		release(ctx, reg.log, lease)
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if r := s.Report(); !r.Clean() {
		reg.log.Warn("session repaired on open", "path", path, "report", fmt.Sprintf("%+v", r))
	}
	if err := reg.markTakeover(s, lease, seen); err != nil {
		if cerr := s.Close(); cerr != nil {
			reg.log.Warn("close session", "path", path, "err", cerr)
		}
		release(ctx, reg.log, lease)
		return nil, err
	}
	return reg.installOwner(path, s, lease), nil
}

// installOwner makes the owner of a session just opened the loaded one of
// path, unless another goroutine loaded it first (then s is closed and that
// owner returned), and watches its lease unless it is never lost.
func (reg *registry) installOwner(path string, s *session.Session, lease cluster.Lease) *owner {
	o := reg.newOwner(path, s, lease)
	reg.mu.Lock()
	if prev, ok := reg.owners[path]; ok {
		reg.mu.Unlock()
		s.Close()
		release(context.Background(), reg.log, lease)
		return prev
	}
	reg.owners[path] = o
	n := len(reg.owners)
	reg.mu.Unlock()
	reg.metrics.setOwners(n)
	if permanent(lease) {
		return o // nothing to watch: an idle owner costs no goroutine
	}
	o.stopWatch = make(chan struct{})
	reg.watchers.Add(1)
	go func() {
		defer reg.watchers.Done()
		o.watchLease()
	}()
	return o
}

// evictLoop unloads idle sessions so memory stays bounded.
func (reg *registry) evictLoop(ctx context.Context) {
	t := time.NewTicker(reg.cfg.IdleEvict / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			reg.evictIdle(time.Now().Add(-reg.cfg.IdleEvict))
		}
	}
}

// evictIdle unloads the owners idle since before and says how many.
func (reg *registry) evictIdle(before time.Time) int {
	reg.mu.Lock()
	var idle []*owner
	for _, o := range reg.owners {
		if o.idleSince(before) {
			reg.unloadLocked(o)
			idle = append(idle, o)
		}
	}
	reg.mu.Unlock()
	if len(idle) > 0 {
		reg.located.forgetOwners(idle...)
	}
	for _, o := range idle {
		o.close()
	}
	reg.metrics.setOwners(reg.ownerCount())
	return len(idle)
}

// ownerCount is the number of loaded owners.
func (reg *registry) ownerCount() int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return len(reg.owners)
}

// unloadLocked removes o from the loaded owners and counts it closing
// until its close has ended (unloaded). The caller holds mu, and closes o.
func (reg *registry) unloadLocked(o *owner) {
	delete(reg.owners, o.path)
	if reg.closing == nil {
		reg.closing = map[string]*owner{}
	}
	reg.closing[o.path] = o
}

// unloaded drops o from the closing owners: its close has ended, its
// lease is released.
func (reg *registry) unloaded(o *owner) {
	reg.mu.Lock()
	if reg.closing[o.path] == o {
		delete(reg.closing, o.path)
	}
	reg.mu.Unlock()
}

// fileLost reports whether err, from loading a session, says its file is
// gone or is not a session file (an empty one whose creation failed): the
// only failures after which a new session file does not fork a
// conversation whose file still holds it.
func fileLost(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, session.ErrNotSession)
}

// keptIndexMin and keptIndexMax bound the indexes of evicted sessions the
// gateway keeps (session.Indexes): those of sessions of at least 5,000
// entries, whose load costs, 2,000,000 entries in all (about 110 bytes
// each: up to about 220 MiB when long conversations are idle; a
// conversation of a million entries is kept); an idle small session keeps
// nothing. The same minimum decides which are saved in <data>/index.
const (
	keptIndexMin = 5_000
	keptIndexMax = 2_000_000
)
