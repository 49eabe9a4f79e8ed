package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/extensions"
	"github.com/pibot/pibot/internal/worktree"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/tools"
	"github.com/pibot/pibot/tools/mcp"
	"github.com/pibot/pibot/tools/sandbox"
)

// newLogger returns the logger configured by log.level and log.format.
func newLogger(w io.Writer, l config.Log) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if l.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// toolbox is the tool set of a process: built (and its sandbox probed)
// once, then handed to every run, with an attach tool bound to the run's
// conversation when the gateway provides one.
type toolbox struct {
	set   *tools.Set
	names []string // agent.tools, in order
	ws    string   // absolute workspace
	mcp   *mcp.Manager
	// at are the sets working in worktrees of the workspace, by
	// directory (tools.Set.At), made on first use.
	mu sync.Mutex
	at map[string]atSet
	// trees is the agent's worktree manager (agents.NAME.worktree:
	// per_thread), which says what git needs in a worktree's sandbox;
	// nil: none.
	trees *worktree.Manager
	log   *slog.Logger
}

// newToolbox builds the tools configured in cfg.
// extraDeny are further paths no tool may reach (other agents'
// workspaces).
func newToolbox(ctx context.Context, cfg config.Config, log *slog.Logger, extraDeny ...string) (*toolbox, error) {
	ws, deny, err := prepareWorkspace(cfg)
	if err != nil {
		return nil, err
	}
	deny = append(deny, extraDeny...)
	mode, err := sandbox.ParseMode(cfg.Agent.Sandbox)
	if err != nil {
		return nil, &config.Error{Key: "agent.sandbox", Msg: err.Error()}
	}
	j, err := newJail(cfg, log)
	if err != nil {
		return nil, err
	}
	data, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, &config.Error{Key: "data_dir", Msg: err.Error()}
	}
	l := cfg.Agent.Limits
	set, err := tools.New(ctx, tools.Options{
		Jail:                   j,
		MaxOutputFile:          int64(l.Output),
		Workspace:              ws,
		WorkspaceOnly:          cfg.Agent.WorkspaceOnly.Everyone(),
		NonOwnersWorkspaceOnly: cfg.Agent.WorkspaceOnly.NonOwners(),
		Quota: tools.Quota{FileSize: int64(l.FileSize), WorkspaceSize: int64(l.WorkspaceSize),
			DiskReserve: int64(l.DiskReserve), Guard: []string{data}},
		Sandbox:        mode,
		SandboxCache:   sandboxCacheFile(),
		AllowNetwork:   cfg.Agent.AllowNetwork,
		DefaultTimeout: cfg.Agent.ToolTimeout.D(),
		Logger:         log,
		DenyPaths:      deny,
	})
	if err != nil {
		return nil, err
	}
	m, err := newMCP(cfg, log)
	if err != nil {
		return nil, err
	}
	return &toolbox{set: set, names: slices.Clone(cfg.Agent.Tools), ws: ws, mcp: m, at: map[string]atSet{}, log: log}, nil
}

// sandboxCacheFile is where a successful probe of bwrap is remembered
// (sandbox.ProbeCache): pibot/sandbox-probe.json in the user's cache
// directory ($XDG_CACHE_HOME, else ~/.cache); "" (probe every start)
// when there is none.
func sandboxCacheFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "pibot", "sandbox-probe.json")
}

// close stops the MCP servers.
func (t *toolbox) close() { _ = t.mcp.Close() }

// forRun returns the configured tools of one run, working in dir (a
// worktree of the workspace; "": the workspace). owner says, at each
// call, whether the run's requester is an owner (the file tools confine
// everyone else's calls under agent.workspace_only: non_owners); attach
// is included only when to is not nil (a conversation to send files to).
// A worktree the tools cannot work in gives no tools at all, never the
// workspace's.
func (t *toolbox) forRun(dir string, to tools.Attacher, owner func() bool) []agent.Tool {
	base := t.set
	if dir != "" {
		var err error
		if base, err = t.atDir(dir); err != nil {
			t.log.Error("tools in a worktree", "dir", dir, "err", err)
			return nil
		}
	}
	set := base.Bind(owner, to)
	var out []agent.Tool
	for _, name := range t.names {
		if tool := set.Get(name); tool != nil {
			out = append(out, tool)
		}
	}
	// MCP servers start on the first run that asks for tools.
	for _, tool := range t.mcp.Tools(context.Background()) {
		out = append(out, tool)
	}
	return out
}

// atSet is a set working in a directory, and that directory as it was
// when the set was made.
type atSet struct {
	set *tools.Set
	fi  os.FileInfo
}

// atDir is the set working in dir, made once per directory: a worktree
// removed and made again at the same path (pruned, then used again) is a
// new directory, and gets a new set (the old one's handle is of the
// removed directory).
func (t *toolbox) atDir(dir string) (*tools.Set, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.at[dir]; ok && os.SameFile(s.fi, fi) {
		return s.set, nil
	}
	s, err := t.set.At(dir, t.gitMounts(dir))
	if err != nil {
		return nil, err
	}
	t.at[dir] = atSet{set: s, fi: fi}
	return s, nil
}

// gitMounts is what the sandbox of a call in the worktree dir shows of
// its repository, so that git works there (worktree.Manager.Mounts); nil
// without a worktree manager.
func (t *toolbox) gitMounts(dir string) func() ([]sandbox.Mount, error) {
	if t.trees == nil {
		return nil
	}
	return func() ([]sandbox.Mount, error) {
		ms, err := t.trees.Mounts(dir)
		if err != nil {
			t.log.Warn("worktree: git is not available in the sandbox of this call", "dir", dir, "err", err)
			return nil, err
		}
		out := make([]sandbox.Mount, len(ms))
		for i, m := range ms {
			out[i] = sandbox.Mount{Path: m.Path, Write: m.Write}
		}
		return out, nil
	}
}

// worktrees is the worktree manager of an agent whose view sets
// worktree: per_thread (nil otherwise), over its workspace ws. tb, when
// not nil, is the agent's toolbox: its calls in worktrees get what git
// needs in the sandbox.
func worktrees(ctx context.Context, view config.Config, name, ws string, tb *toolbox, log *slog.Logger) (gateway.Worktrees, error) {
	if view.Agent.Worktree != config.WorktreePerThread {
		return nil, nil
	}
	m, err := worktree.New(ctx, ws, log)
	if err != nil {
		return nil, &config.Error{Key: config.AgentKey(name) + ".worktree", Msg: fmt.Sprintf("per_thread needs the workspace %s to be the top level of a git repository and git installed: %v", ws, err)}
	}
	if tb != nil {
		tb.mu.Lock()
		tb.trees = m
		tb.mu.Unlock()
	}
	return m, nil
}

// specs describes the tools forRun returns.
func (t *toolbox) specs(withAttach bool) []llm.ToolSpec {
	var out []llm.ToolSpec
	for _, name := range t.names {
		switch {
		case name == "attach" && withAttach:
			out = append(out, tools.NewAttach(t.set.Workspace(), nil).Spec())
		case name == "attach":
		default:
			if tool := t.set.Get(name); tool != nil {
				out = append(out, tool.Spec())
			}
		}
	}
	return out
}

// prompt returns the system prompt builder for these tools, with the
// project context and skills block of ext (skills listed when read is on).
func (t *toolbox) prompt(cfg config.Config, withAttach bool, ext *extensions.Set) promptBuilder {
	return promptBuilder{workspace: t.ws, tools: t.specs(withAttach), customFile: cfg.Agent.SystemPromptFile,
		context: ext.Context, skills: ext.SkillsBlock, extra: cfg.Agent.SystemPrompt}
}

// compactionSettings maps agent.compaction.
func compactionSettings(cfg config.Config) compaction.Settings {
	return compaction.Settings{
		Enabled:          cfg.Agent.Compaction.Enabled,
		ReserveTokens:    cfg.Agent.Compaction.ReserveTokens,
		KeepRecentTokens: cfg.Agent.Compaction.KeepRecentTokens,
	}
}

// retryConfig maps agent.retry.
func retryConfig(cfg config.Config) agent.RetryConfig {
	return agent.RetryConfig{
		Enabled:    cfg.Agent.Retry.Enabled,
		MaxRetries: cfg.Agent.Retry.MaxRetries,
		BaseDelay:  cfg.Agent.Retry.BaseDelay.D(),
	}
}

// toolPaths tells the gateway which paths a tool call would touch, so
// group calls that reach outside the workspace ask first.
func (t *toolbox) toolPaths(dir, tool string, args json.RawMessage) ([]gateway.ToolPath, error) {
	set := t.set
	if dir != "" {
		var err error
		if set, err = t.atDir(dir); err != nil {
			return nil, err
		}
	}
	touches, err := set.Workspace().Paths(tool, args)
	out := make([]gateway.ToolPath, len(touches))
	for i, p := range touches {
		out[i] = gateway.ToolPath{Path: p.Path, Inside: p.Inside, Write: p.Write}
	}
	return out, err
}
