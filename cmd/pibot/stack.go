package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/adapters/term"
	"github.com/pibot/pibot/adapters/web"
	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/gateway/spend"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/internal/buildinfo"
	"github.com/pibot/pibot/internal/crashpoint"
	"github.com/pibot/pibot/internal/otlp"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers"
)

// Embedded cluster settings.
const (
	dedupeTTL = 48 * time.Hour
	dedupeMax = 100000
)

// stack is a gateway with the local pieces it needs, all in the data
// directory, which it holds exclusively.
type stack struct {
	lock    *cluster.DirLock
	inbox   *cluster.LocalInbox
	cluster *clusterParts // cluster mode (clustermode.go); lock and inbox are then nil
	gw      *gateway.Gateway
	tools   *toolbox
	// access and spend are swapped by a reload (reload.go).
	access *access.Checker
	spend  *spend.Limiter
	// spendFile keeps the counts; close writes those that wait.
	spendFile *spend.FileStore
	// stopTracer stops the span exporter after sending what is left.
	stopTracer func()
	// agentTools are the tool sets of the agents besides the default;
	// router routes new sessions to them (nil without agents).
	agentTools []*toolbox
	router     *router
}

// buildAgents builds the gateway's agents besides the default one, each
// with its own tools (denied every other agent's workspace), MCP servers,
// extensions and system prompt.
func (st *stack) buildAgents(ctx context.Context, cfg config.Config, log *slog.Logger) (map[string]gateway.Agent, error) {
	out := map[string]gateway.Agent{}
	for _, name := range cfg.AgentNames()[1:] {
		view := agentView(cfg, name)
		alog := log.With("agent", name)
		tb, err := newToolbox(ctx, view, alog, otherWorkspaces(cfg, name)...)
		if err != nil {
			return nil, agentKeys(name, err)
		}
		st.agentTools = append(st.agentTools, tb)
		ext, err := newExtensions(view, tb.ws, alog)
		if err != nil {
			return nil, agentKeys(name, err)
		}
		prompt := tb.prompt(view, true, ext)
		wts, err := worktrees(ctx, view, name, tb.ws, tb, alog)
		if err != nil {
			return nil, err
		}
		out[name] = gateway.Agent{
			Model:    view.Agent.Model,
			Thinking: llm.ThinkingLevel(view.Agent.Thinking),
			SystemPrompt: func() string {
				p, err := prompt.build()
				if err != nil {
					alog.Error("system prompt", "err", err)
					return "You are pibot, an expert coding assistant."
				}
				return p
			},
			Workspace:              tb.ws,
			Tools:                  func(r gateway.ToolRun) []agent.Tool { return tb.forRun(r.Dir, r.Attach, r.Owner) },
			Worktrees:              wts,
			WorktreePruneAfter:     view.Agent.WorktreePruneAfter.D(),
			DMApprovals:            view.Agent.Approvals.DM,
			GroupApprovals:         view.Agent.Approvals.Group,
			ToolPaths:              tb.toolPaths,
			WorkspaceOnly:          view.Agent.WorkspaceOnly.Everyone(),
			NonOwnersWorkspaceOnly: view.Agent.WorkspaceOnly.NonOwners(),
			QueueMode:              view.Agent.Queue.Mode,
			Extensions:             ext,
		}
		log.Info("agent", "name", name, "model", view.Agent.Model, "workspace", tb.ws)
	}
	return out, nil
}

// localOwners returns the users of the local adapters: whoever can reach
// the terminal or the (loopback or token-protected) web chat owns the bot.
func localOwners() []string {
	return []string{string(web.Platform) + ":" + web.UserID, string(term.Platform) + ":" + term.UserID}
}

// localOwner is the rights of the terminal's `pibot chat`: its user owns
// the bot.
func localOwner() bool { return true }

// openStack locks the data directory and builds the gateway over
// adapters. metrics may be nil. close must be called when it is not nil.
// With rep (cluster mode) the data directory is shared with the other
// replicas and the gateway's seams are in Redis.
func openStack(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger, adapters []chat.Adapter, metrics prometheus.Registerer, rep *replicaState) (st *stack, err error) {
	if rep != nil {
		return openReplicaStack(ctx, cfg, getenv, log, adapters, metrics, rep)
	}
	lock, err := cluster.LockDir(cfg.DataDir)
	if errors.Is(err, cluster.ErrLocked) {
		pid, _ := os.ReadFile(dataPath(cfg, ".pibot.lock"))
		return nil, fmt.Errorf("data directory %s is in use by another pibot (pid %s); stop it or set data_dir to another directory",
			cfg.DataDir, strings.TrimSpace(string(pid)))
	}
	if err != nil {
		return nil, err
	}
	st = &stack{lock: lock}
	defer func() {
		if err != nil {
			st.close()
			st = nil
		}
	}()
	locker, err := cluster.NewLocker(cfg.DataDir)
	if err != nil {
		return st, err
	}
	// A crashpoints build's suite lowers the compaction threshold; a
	// release build's InboxCompactAfter is 0 (the inbox's own).
	inboxOpts := cluster.InboxOptions{CompactAfter: crashpoint.InboxCompactAfter()}
	if st.inbox, err = cluster.OpenInboxWith(dataPath(cfg, "inbox.jsonl"), inboxOpts); err != nil {
		return st, err
	}
	store, err := access.OpenStore(dataPath(cfg, "pairing.json"))
	if err != nil {
		return st, err
	}
	return st, st.build(ctx, cfg, getenv, log, metrics, store, gateway.Deps{
		Adapters: adapters,
		Inbox:    st.inbox,
		Dedupe:   cluster.NewDedupe(dedupeTTL, dedupeMax),
		Locker:   locker,
		// access.budget per sender; owners are exempt.
		Budget:  senderBudget(cfg),
		Notices: store,
	}, gateway.ClusterConfig{})
}

// openReplicaStack builds the gateway of a cluster replica.
func openReplicaStack(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger, adapters []chat.Adapter, metrics prometheus.Registerer, rep *replicaState) (*stack, error) {
	parts, err := rep.openCluster(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	st := &stack{cluster: parts}
	registerClusterMetrics(metrics, rep.rdb, parts.locker)
	rep.events.register(metrics)
	deps := parts.deps
	deps.Adapters = adapters
	if err := st.build(ctx, cfg, getenv, log, metrics, parts.pairing, deps, gateway.ClusterConfig{Enabled: true}); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

// build makes st's gateway over deps (with Models and Access filled in
// here) and the pairing store.
func (st *stack) build(ctx context.Context, cfg config.Config, getenv func(string) string, log *slog.Logger, metrics prometheus.Registerer,
	store access.Pairings, deps gateway.Deps, cl gateway.ClusterConfig) error {
	st.access = access.NewChecker(accessPolicy(cfg), store)
	if st.cluster != nil {
		// The replicas count against the same caps.
		st.spend = spend.NewLimiter(st.cluster.spend, spendCaps(cfg), nil)
	} else {
		spendFile, err := spend.OpenFile(dataPath(cfg, "spend.json"))
		if err != nil {
			return err
		}
		st.spendFile = spendFile
		st.spend = spend.NewLimiter(spendFile, spendCaps(cfg), nil)
	}
	st.spend.SetAgentCaps(agentSpendCaps(cfg))
	reg, err := newRegistry(cfg, getenv, log, 0)
	if err != nil {
		return err
	}
	tb, err := newToolbox(ctx, agentView(cfg, config.DefaultAgent), log, otherWorkspaces(cfg, config.DefaultAgent)...)
	if err != nil {
		return err
	}
	st.tools = tb
	if shared := sharedFileSystem(tb.ws, cfg.DataDir, cfg.Agent.Limits.DiskReserve); shared != "" {
		log.Warn(shared)
	}
	if cfg.Agent.WorkspaceOnly == config.WorkspaceOnlyNone {
		log.Warn("agent.workspace_only is false: the file tools of users who are not owners reach outside the workspace too (the default, non_owners, keeps them in it)")
	}
	model := defaultModel(cfg, reg)
	errs, warns := modelProblems(cfg, getenv)
	for _, p := range append(errs, warns...) {
		log.Warn("configuration: " + p)
	}
	ext, err := newExtensions(agentView(cfg, config.DefaultAgent), tb.ws, log)
	if err != nil {
		return err
	}
	prompt := tb.prompt(agentView(cfg, config.DefaultAgent), true, ext)
	wts, err := worktrees(ctx, cfg, config.DefaultAgent, tb.ws, tb, log)
	if err != nil {
		return err
	}
	scheds, err := scheduleSpecs(cfg)
	if err != nil {
		return err
	}
	gcfg := gateway.Config{
		DataDir:     cfg.DataDir,
		Model:       model,
		NoModelHelp: noModelHelp,
		Thinking:    llm.ThinkingLevel(cfg.Agent.Thinking),
		SystemPrompt: func() string {
			p, err := prompt.build()
			if err != nil {
				log.Error("system prompt", "err", err)
				return "You are pibot, an expert coding assistant."
			}
			return p
		},
		Workspace:              tb.ws,
		Tools:                  func(r gateway.ToolRun) []agent.Tool { return tb.forRun(r.Dir, r.Attach, r.Owner) },
		Worktrees:              wts,
		WorktreePruneAfter:     cfg.Agent.WorktreePruneAfter.D(),
		DMApprovals:            cfg.Agent.Approvals.DM,
		GroupApprovals:         cfg.Agent.Approvals.Group,
		ToolPaths:              tb.toolPaths,
		WorkspaceOnly:          cfg.Agent.WorkspaceOnly.Everyone(),
		NonOwnersWorkspaceOnly: cfg.Agent.WorkspaceOnly.NonOwners(),
		ApprovalTimeout:        cfg.Agent.Approvals.Timeout.D(),
		QueueMode:              cfg.Agent.Queue.Mode,
		CollectDebounce:        cfg.Agent.Queue.Collect.Debounce.D(),
		CollectCap:             cfg.Agent.Queue.Collect.Cap,
		CollectDrop:            cfg.Agent.Queue.Collect.Drop,
		Verbosity:              stream.Verbosity(cfg.Agent.Verbosity),
		Compaction:             compactionSettings(cfg),
		Retry:                  retryConfig(cfg),
		IdleEvict:              cfg.Agent.IdleEvict.D(),
		Watchdog:               watchdog(cfg, log, metrics),
		Schedules:              scheds,
		Logger:                 log,
		Extensions:             ext,
		Cluster:                cl,
	}
	if len(cfg.Agents) > 0 {
		if gcfg.Agents, err = st.buildAgents(ctx, cfg, log); err != nil {
			return err
		}
		st.router = newRouter(cfg)
		gcfg.Route = st.router.route
	}
	// access.schedules_per_user: 0 is no cap (the gateway's 0 is its default).
	gcfg.SchedulesPerUser = cmp.Or(cfg.Access.SchedulesPerUser, -1)
	if metrics != nil {
		gcfg.Metrics = gateway.NewMetrics(metrics)
	}
	if cfg.OTel.Endpoint != "" {
		tr, err := otlp.New(otlp.Config{Endpoint: cfg.OTel.Endpoint, Service: cfg.OTel.ServiceName, Version: buildinfo.Get().Version, Logger: log})
		if err != nil {
			return err
		}
		tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr.Run(tctx)
		}()
		st.stopTracer = func() { cancel(); <-done }
		gcfg.Tracer = tr
		log.Info("traces on", "endpoint", redactedURL(cfg.OTel.Endpoint))
	}
	models := newFallbackModels(reg, model, cfg.Agent.Fallbacks, log)
	deps.Models, deps.Access, deps.Spend = models, st.access, st.spend
	st.gw, err = gateway.New(gcfg, deps)
	if err != nil {
		return err
	}
	if model == "" {
		log.Warn("no model configured; the chat will explain what to set")
	} else {
		// (Not the sandbox's status: its probe may still run, and serve
		// does not wait for it; the tools log it once it is decided.)
		log.Info("agent", "model", model, "workspace", tb.ws)
	}
	return nil
}

// senderBudget is access.budget as the in-process per-sender budget; nil
// when it is off (per_minute 0).
func senderBudget(cfg config.Config) gateway.Budget {
	b := cfg.Access.Budget
	if b.PerMinute <= 0 {
		return nil
	}
	return cluster.NewBudget(b.PerMinute/60, b.Burst)
}

// close releases the inbox and the data directory.
func (s *stack) close() {
	if s.tools != nil {
		s.tools.close() // the MCP servers, after the gateway stopped its runs
	}
	for _, tb := range s.agentTools {
		tb.close()
	}
	if s.stopTracer != nil {
		s.stopTracer()
	}
	if s.spendFile != nil {
		_ = s.spendFile.Close() // the counts that wait, after the last run
	}
	if s.cluster != nil {
		s.cluster.close()
		return
	}
	if s.inbox != nil {
		_ = s.inbox.Close()
	}
	_ = s.lock.Unlock()
}

// fallbackModels resolves models through the registry; the default model
// comes wrapped in its agent.fallbacks chain, built once so cooldowns
// persist across runs.
type fallbackModels struct {
	reg     *providers.Registry
	primary string
	chain   llm.Model // nil without fallbacks
}

func newFallbackModels(reg *providers.Registry, primary string, fallbacks []string, log *slog.Logger) *fallbackModels {
	f := &fallbackModels{reg: reg, primary: primary}
	if primary == "" || len(fallbacks) == 0 {
		return f
	}
	first, err := reg.Model(primary)
	if err != nil {
		return f // reported on every use by Model
	}
	chain := []llm.Model{first}
	for _, ref := range fallbacks {
		m, err := reg.Model(ref)
		if err != nil {
			log.Warn("fallback model unusable", "model", ref, "err", err)
			continue
		}
		chain = append(chain, m)
	}
	if len(chain) > 1 {
		f.chain = providers.Fallback(chain, providers.FallbackPolicy{})
	}
	return f
}

// Model returns the model for ref.
func (f *fallbackModels) Model(ref string) (llm.Model, error) {
	if ref == f.primary && f.chain != nil {
		return f.chain, nil
	}
	return f.reg.Model(ref)
}

// redactedURL hides a password in u (a collector URL may carry one).
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return p.Redacted()
}
