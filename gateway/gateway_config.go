package gateway

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/stream"
	"github.com/pibot/pibot/internal/otlp"
	"github.com/pibot/pibot/llm"
)

// Config configures a Gateway. Zero values get the defaults noted.
type Config struct {
	// DataDir holds sessions/ and, unless Deps.Index is set, index.jsonl.
	DataDir string
	// Model is the default "provider/model"; "" means no model configured,
	// and the chat says what to set (NoModelHelp).
	Model       string
	NoModelHelp string
	Thinking    llm.ThinkingLevel
	// SystemPrompt builds the system prompt of a run.
	SystemPrompt func() string
	Workspace    string
	Tools        ToolFactory
	// Approvals: per-tool policy allow|ask|deny for DMs and groups.
	DMApprovals    map[string]string
	GroupApprovals map[string]string
	// ToolPaths says which paths a tool call would touch (nil: none
	// known). In groups a call that would touch a path outside the
	// workspace asks for approval even when its tool's policy is allow;
	// approval messages show the paths. dir is where the run's tools
	// work (ToolRun.Dir: its worktree; "" the workspace), against which
	// relative paths resolve and "inside" is judged.
	ToolPaths func(dir, tool string, args json.RawMessage) ([]ToolPath, error)
	// WorkspaceOnly: the tools themselves refuse paths outside the
	// workspace, so such calls are not asked about.
	WorkspaceOnly bool
	// NonOwnersWorkspaceOnly: the same for calls of runs whose requester
	// is not an owner (ToolRun.Owner).
	NonOwnersWorkspaceOnly bool
	ApprovalTimeout        time.Duration // default 10m
	// Queue defaults (per location, changed with /queue).
	QueueMode       string        // steer (default) | followup | collect | interrupt
	CollectDebounce time.Duration // default 500ms
	CollectCap      int           // default 20
	CollectDrop     string        // old (default) | new
	Verbosity       stream.Verbosity
	Compaction      compaction.Settings
	Retry           agent.RetryConfig
	// Watchdog bounds every run (agent.max_run, agent.max_idle).
	Watchdog agent.Watchdog
	// IdleEvict unloads a session with no activity (default 10m).
	IdleEvict time.Duration
	// FinalWait bounds how long a final reply waits out rate limits.
	FinalWait time.Duration
	// DrainTimeout is how long shutdown lets runs finish (default 20s).
	// Runs still going then are interrupted without recording anything
	// more, so they can be resumed after the restart.
	DrainTimeout time.Duration
	// SessionGroupWindow is the group commit of the session files
	// (default 1s): a session is fsynced at most once per window unless
	// something must be durable at once, and a finished run's messages
	// leave the inbox with that fsync. A crash of the machine (not of
	// pibot) within the window may answer them again.
	SessionGroupWindow time.Duration
	// Extensions are the prompt templates, skills and hooks (nil: none).
	Extensions Extensions
	// Schedules are the configured scheduled prompts; ScheduleTZ is the
	// zone of schedules made with /schedule ("" : the process's zone).
	// Both live in DataDir/schedules.json with those made in chat.
	Schedules  []ScheduleSpec
	ScheduleTZ string
	Logger     *slog.Logger
	Metrics    *Metrics
	// SchedulesPerUser caps the schedules a non-owner keeps, made with
	// /schedule over all conversations of a platform (default 10; < 0: no
	// cap). The configured Schedules do not count.
	SchedulesPerUser int
	// Tracer records a span per message at intake and per run, joined by
	// the traceparent kept in the inbox item (otel.endpoint); nil: off.
	Tracer *otlp.Tracer
	// Cluster: the shared seams of Deps are shared with other replicas
	// (cluster_shared.go).
	Cluster ClusterConfig
	// Worktrees and WorktreePruneAfter are the default agent's (see
	// Agent).
	Worktrees          Worktrees
	WorktreePruneAfter time.Duration
	// Agents are the agents besides the default one, which the fields
	// above configure (Model, Thinking, SystemPrompt, Workspace, Tools,
	// the approvals, ToolPaths, the confinement, QueueMode, Extensions).
	Agents map[string]Agent
	// Route picks the agent of a conversation's new session and says why
	// (the binding); nil: every session is the default agent's, and
	// sessions record no agent. A session keeps its agent until /new.
	Route func(in chat.Inbound) (agent, why string)
}

// setDefaults gives the zero values of c their defaults.
func setDefaults(c *Config) {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Thinking == "" {
		c.Thinking = llm.ThinkingOff
	}
	if c.ApprovalTimeout <= 0 {
		c.ApprovalTimeout = 10 * time.Minute
	}
	if c.QueueMode == "" {
		c.QueueMode = modeSteer
	}
	if c.CollectDebounce <= 0 {
		c.CollectDebounce = 500 * time.Millisecond
	}
	if c.CollectCap <= 0 {
		c.CollectCap = 20
	}
	if c.CollectDrop == "" {
		c.CollectDrop = "old"
	}
	if c.Verbosity == "" {
		c.Verbosity = stream.Tools
	}
	if c.IdleEvict <= 0 {
		c.IdleEvict = 10 * time.Minute
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 20 * time.Second
	}
	if c.SessionGroupWindow <= 0 {
		c.SessionGroupWindow = sessionGroupWindow
	}
	if c.FinalWait <= 0 {
		c.FinalWait = time.Minute
	}
	if c.SystemPrompt == nil {
		c.SystemPrompt = func() string { return "You are pibot, a helpful assistant." }
	}
	if c.Tools == nil {
		c.Tools = func(ToolRun) []agent.Tool { return nil }
	}
}
