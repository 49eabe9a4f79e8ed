package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// Models resolves "provider/model" references.
type Models interface {
	Model(ref string) (llm.Model, error)
}

// The collaborators of the cluster contract (cluster/contract.go, where
// their error semantics are written down): the gateway's names for them.
type (
	// Inbox keeps accepted events durable until they are applied.
	Inbox = cluster.Inbox
	// Dedupe drops redelivered platform events.
	Dedupe = cluster.Dedupe
	// Budget rate-limits inbound messages per sender.
	Budget = cluster.Budget
	// Index maps a location key to the session file that holds it.
	Index = cluster.Index
	// Locker grants the right to write a session file.
	Locker = cluster.Locker
)

// Attacher sends a file from the workspace to the conversation a tool runs
// for. The gateway implements it per run; the attach tool calls it.
type Attacher interface {
	Attach(ctx context.Context, name, mimeType string, r io.Reader, size int64) error
}

// ToolRun is what a run tells the tools it builds.
type ToolRun struct {
	// Attach delivers files to the run's conversation.
	Attach Attacher
	// Dir is where the tools work: the worktree of the run's branch
	// (Agent.Worktrees), a directory inside the workspace the tools then
	// treat as their workspace; "" is the agent's workspace.
	Dir string
	// Owner reports, at the time of a tool call, whether the user the run
	// acts for (its requester: the sender of its latest message) is an
	// owner of the bot. The file tools confine the calls of everyone else
	// (agent.workspace_only: non_owners).
	Owner func() bool
}

// ToolFactory builds the tools of one run.
type ToolFactory func(run ToolRun) []agent.Tool

// ToolPath is a path a tool call would touch.
type ToolPath struct {
	Path   string // absolute
	Inside bool   // inside the workspace, symlinks followed
	Write  bool   // the call would change it
}

// Gateway routes chat events to session owners. Create it with New and
// run it with Run.
type Gateway struct {
	cfg      Config
	agents   agents // by name, the default among them (agents.go)
	log      *slog.Logger
	adapters map[chat.Platform]chat.Adapter
	models   Models
	access   *access.Checker
	inbox    Inbox
	dedupe   Dedupe
	locker   Locker
	budget   Budget
	spend    spendCaps
	metrics  *Metrics
	// holder names this process in lease markers (host/pid).
	holder string
	// splitters are shared by every reply's stream controller.
	splitters chat.Splitters

	notices PairingNotices
	index   Index
	// closeIndex closes an index the gateway opened itself.
	closeIndex func() error

	work     workGroup  // the goroutines of work (runs, mailbox items) shutdown waits for (gateway_work.go)
	mail     *mailboxes // one per location: inbox items in order (mailbox.go)
	sessions *registry  // the loaded session owners (registry.go)
	recovery *recovery  // replays what a restart left unfinished (recover.go)
	approval *approvals
	commands *commands      // the command table and button presses
	intake   *intake        // the sink of every adapter (intake.go)
	ready    chan struct{}  // closed once Run has recovered and started the adapters
	health   *health        // can the data directory be written (health.go)
	replier  *replier       // the gateway's own messages to the chats (replier.go)
	threads  *threads       // reply threads of channels (intake_threads.go)
	runner   *adapterRunner // runs the adapters (adapters.go)
	sched    *schedules     // scheduled prompts (schedules.go)
	pump     *pump          // cluster mode: the shared inbox to the sessions (cluster_shared.go)
	outage   *outage        // cluster mode: is the shared store reachable (cluster_outage.go)
	leaver   *inboxLeaver   // cluster mode: tells the shared inbox what an owner gave up (cluster_leave.go)
}

// Deps are the collaborators of a Gateway.
type Deps struct {
	Adapters []chat.Adapter
	Models   Models
	Access   *access.Checker
	Inbox    Inbox
	Dedupe   Dedupe
	Locker   Locker
	// Budget limits messages per sender (owners are exempt); nil: no limit.
	Budget Budget
	// Spend enforces the daily spend caps (owners are exempt); nil: no
	// caps.
	Spend SpendLimiter
	// Index binds locations to session files; nil: the gateway opens
	// DataDir/index.jsonl (cluster.LocalIndex), rebuilt from the session files
	// when missing, and closes it when Run ends.
	Index Index
	// Notices, when set, is watched for users approved by `pibot pairing
	// approve`, who are told in their chat that they may talk now.
	Notices PairingNotices
	// SessionFiles stores the session files of DataDir/sessions: the
	// sessions, the history and the index rebuild read and write them
	// through it; nil: the local file system (session.FileStorage). It is
	// for a file system that fails on purpose, so it must store the files
	// there too (RebuildIndex, a cluster's index seed, reads them
	// directly).
	SessionFiles session.Storage
}

// New builds a gateway. It loads the location index of DataDir.
func New(cfg Config, d Deps) (*Gateway, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("gateway: DataDir is required")
	}
	if d.Inbox == nil || d.Dedupe == nil || d.Locker == nil || d.Access == nil {
		return nil, errors.New("gateway: Inbox, Dedupe, Locker and Access are required")
	}
	if _, ok := d.Inbox.(cluster.Consumer); cfg.Cluster.Enabled && !ok {
		// Without Consume there is no pump: accepted items would wait
		// for a restart instead of reaching their session's holder.
		return nil, fmt.Errorf("gateway: cluster mode needs an inbox that hands out its items (cluster.Consumer); %T is not one", d.Inbox)
	}
	setDefaults(&cfg)
	g := &Gateway{
		cfg:      cfg,
		log:      cfg.Logger,
		adapters: map[chat.Platform]chat.Adapter{},
		models:   d.Models,
		access:   d.Access,
		inbox:    d.Inbox,
		dedupe:   d.Dedupe,
		locker:   d.Locker,
		budget:   d.Budget,
		notices:  d.Notices,
		spend:    spendCaps{lim: d.Spend, rights: d.Access, log: cfg.Logger},
		metrics:  cfg.Metrics,
		holder:   holderID(),
		mail:     newMailboxes(),
		ready:    make(chan struct{}),
	}
	if err := os.MkdirAll(sessionsDir(cfg.DataDir), 0o700); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	files := d.SessionFiles
	if files == nil {
		files = session.FileStorage{}
	}
	g.index = d.Index
	if g.index == nil {
		ix, err := openLocalIndex(filepath.Join(cfg.DataDir, "index.jsonl"), sessionsDir(cfg.DataDir), files, g.log)
		if err != nil {
			return nil, err
		}
		g.index, g.closeIndex = ix, ix.Close
	}
	for _, a := range d.Adapters {
		g.adapters[a.Platform()] = a
	}
	g.agents = newAgents(&g.cfg)
	g.replier = &replier{adapters: g.adapters, log: g.log, metrics: g.metrics, finalWait: cfg.FinalWait}
	g.threads = newThreads(g.adapters, g.index, g.log)
	wireCommands(g) // command_host.go
	g.intake = wireIntake(g)
	sched, err := wireSchedules(g)
	if err != nil {
		return nil, err
	}
	g.sched = sched
	g.sched.sink, g.commands.schedules = g.intake.sink, g.sched
	g.runner = &adapterRunner{adapters: g.adapters, locker: g.locker, log: g.log, sink: g.intake.sink, commands: g.commands.specs}
	g.sessions = &registry{cfg: &g.cfg, agents: g.agents, log: g.log, index: g.index, locker: g.locker, holder: g.holder, metrics: g.metrics,
		files: files, owners: map[string]*owner{}, newOwner: g.newOwner, indexes: session.NewSavedIndexes(savedIndexesDir(cfg.DataDir), keptIndexMin, keptIndexMax)}
	offerHistory(g.adapters, g.index, g.sessions) // registry_history.go
	g.recovery = &recovery{log: g.log, inbox: g.inbox, dedupe: g.dedupe, index: g.index, sessions: g.sessions,
		adapters: g.adapters, replier: g.replier, metrics: g.metrics, dataDir: cfg.DataDir, replay: g.intake.post, later: g.mail.post}
	if g.pump = newPump(g); g.pump != nil {
		g.intake.accepted = func(ref inboxRef, _ inboxItem) { g.pump.kick(ref.key) }
		g.intake.shared = &degraded{reply: g.replier.reply, redelivery: g.replier.redelivery, now: time.Now}
		g.outage = &outage{log: g.log, now: time.Now, show: showHealth(g.adapters)}
		g.intake.outage, g.pump.outage, g.sched.outage = g.outage, g.outage, g.outage
		if g.pump.store != nil {
			g.intake.admit = g.pump.admit
		}
		g.intake.dropStale = g.pump.dropStale
		g.intake.forgets = g.pump.forgets
		g.intake.ackLater = func(ref inboxRef) bool {
			// A command or press: retried while the session it acted on
			// is held here.
			o := g.sessions.cached(ref.key)
			return o != nil && g.pump.acks.add(ref, o.lease)
		}
	}
	g.leaver = newInboxLeaver(g)
	if g.leaver != nil {
		g.leaver.outage = g.outage
	}
	g.health = &health{log: g.log, replier: g.replier, inbox: g.inbox, index: g.index, dataDir: cfg.DataDir,
		unload: func(o *owner) {
			if g.sessions.forget(o) {
				// Not under the caller's locks; its runs then stop writing.
				g.work.track(func(context.Context) { o.close() })
			}
		},
		reroute: func(p *pending) {
			g.mail.post(p.item.In.Conv.Key(), func() { g.route(g.work.context(), p, nil) })
		},
	}
	return g, nil
}

// savedIndexesDir is where the indexes of dataDir's large sessions are
// saved (session.NewSavedIndexes): a cache, outside the sessions
// directory pi reads.
func savedIndexesDir(dataDir string) string { return filepath.Join(dataDir, "index") }

// sessionsDir is where the session files of dataDir are.
func sessionsDir(dataDir string) string { return filepath.Join(dataDir, "sessions") }

// Run starts every adapter, replays messages accepted before a crash,
// recovers interrupted replies, and serves until ctx ends. Then it stops
// intake, lets runs finish for a short budget, marks the rest interrupted
// and closes every session.
func (g *Gateway) Run(ctx context.Context) error {
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	g.work.start(runCtx)

	var wg sync.WaitGroup
	g.runner.registerCommands(ctx, &wg)
	if g.pump != nil {
		// Cluster mode: what a replica left is taken over per session,
		// by whichever replica gets its lease (cluster_shared.go).
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.pump.run(ctx)
		}()
	} else {
		g.recovery.recover(ctx)
	}
	errs := make(chan error, len(g.adapters)+1)
	for _, a := range g.adapters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.runner.runAdapter(ctx, a); err != nil && !errors.Is(err, context.Canceled) {
				g.log.Error("adapter stopped", "platform", a.Platform(), "err", err)
				errs <- fmt.Errorf("gateway: %s adapter: %w", a.Platform(), err)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.sessions.evictLoop(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.health.probeLoop(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.sched.run(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.pruneWorktrees(ctx, worktreePruneEvery)
	}()
	if g.notices != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			(&announcer{notices: g.notices, adapters: g.adapters, log: g.log, failed: map[string]int{}}).loop(ctx)
		}()
	}
	close(g.ready)
	<-ctx.Done()
	wg.Wait()
	g.drain(cancelRuns)
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// Ready is closed once Run has replayed the inbox and started every
// adapter.
func (g *Gateway) Ready() <-chan struct{} { return g.ready }

// Health returns nil while the gateway can write its data directory, else
// why not (for /readyz).
func (g *Gateway) Health() error { return g.health.check() }

// drain lets active runs finish within a budget, then cancels them and
// closes every owner.
func (g *Gateway) drain(cancel context.CancelFunc) {
	// Intake has stopped: what the mailboxes hold still runs (it may start
	// runs); what a run hands them from now on stays in the inbox for the
	// next start.
	g.mail.close()
	done := make(chan struct{})
	go func() { g.mail.wait(); g.work.wait(); close(done) }()
	// A run waiting for an approval waits for a person, not for work: when
	// every active run does, waiting out the budget gains nothing (the
	// approval is recorded and its buttons work after the restart).
	budget := time.After(g.cfg.DrainTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			if n := g.sessions.activeRuns(); n == 0 || int64(n) > g.approval.waiting.Load() {
				continue
			}
		case <-budget:
		}
		g.sessions.freezeAll("pibot is restarting; this reply will be resumed")
		cancel()
		<-done
		break
	}
	cancel()
	g.sessions.closeAll()
	if g.closeIndex != nil {
		if err := g.closeIndex(); err != nil {
			g.log.Warn("close index", "err", err)
		}
	}
}
