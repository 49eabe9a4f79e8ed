// Package config is pibot's configuration file: the YAML schema, its
// defaults (pibot runs with no file at all), ${VAR} expansion from the
// environment, *_file indirection for secrets, strict decoding (an unknown
// key is an error naming the key) and Validate, which names the key of
// every invalid value.
//
// config knows no other pibot package: cmd/pibot turns a Config into the
// options of each package.
package config

import (
	"time"
)

// Config is the whole file.
type Config struct {
	// DataDir holds sessions, pairing state and the instance lock.
	DataDir string  `yaml:"data_dir"`
	Log     Log     `yaml:"log"`
	HTTP    HTTP    `yaml:"http"`
	Cluster Cluster `yaml:"cluster"`
	// Agent is the default agent ("default"); Agents are further agents,
	// each starting from Agent's settings (config/agents.go), and
	// Bindings route conversations to them.
	Agent    Agent            `yaml:"agent"`
	Agents   map[string]Agent `yaml:"agents"`
	Bindings []Binding        `yaml:"bindings"`
	Access   Access           `yaml:"access"`
	// Limits are the daily spend caps (config/spend.go); agent.limits are
	// something else: the resource limits of a bash call.
	Limits SpendLimits `yaml:"limits"`
	// OTel turns on traces (config/otel.go).
	OTel    OTel     `yaml:"otel"`
	Adapter Adapters `yaml:"adapters"`
	// Providers maps a provider name to its settings.
	Providers map[string]Provider `yaml:"providers"`
	// Hooks maps a hook name to its program (config/extend.go).
	Hooks map[string]Hook `yaml:"hooks"`
	// MCP configures MCP servers whose tools the agent gets.
	MCP MCP `yaml:"mcp"`
	// Schedules are scheduled prompts; more are made in chat (/schedule).
	Schedules []Schedule `yaml:"schedules"`
	// File is the file this configuration was read from, "" for the
	// defaults. It is not a key of the file: the loader sets it, so that
	// tools can be kept away from it.
	File string `yaml:"-"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug|info|warn|error
	Format string `yaml:"format"` // text|json
}

// HTTP configures the shared listener (web chat, webhooks, health, metrics).
type HTTP struct {
	Listen string `yaml:"listen"`
	// MetricsToken is the bearer token /metrics asks for when Listen is
	// not a loopback address (without one, /metrics is off there).
	MetricsToken     string `yaml:"metrics_token" secret:"value"`
	MetricsTokenFile string `yaml:"metrics_token_file" secret:"file"`
}

// Cluster configures cluster mode.
type Cluster struct {
	// RedisURL turns cluster mode on:
	// redis[s]://[user:password@]host[:port][/db].
	RedisURL string `yaml:"redis_url" secret:"url"`
	// LeaseTTL is how long a replica's session lease lives without
	// renewal (renewed every LeaseTTL/3); default 15s.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// KeyPrefix starts every Redis key, so deployments can share one
	// Redis; default "pibot:".
	KeyPrefix string `yaml:"key_prefix"`
	// Secret (or the file SecretFile names) is shared by every replica:
	// what the replicas read back from Redis is sealed with a key derived
	// from it. Required in cluster mode, at least 32 bytes.
	Secret     string `yaml:"secret" secret:"value"`
	SecretFile string `yaml:"secret_file" secret:"file"`
}

// Agent configures the agent every conversation runs.
type Agent struct {
	// Model is "provider/model id".
	Model    string `yaml:"model"`
	Thinking string `yaml:"thinking"`
	// Workspace is the directory tools work in.
	Workspace string `yaml:"workspace"`
	// WorkspaceOnly confines file tool calls to the workspace: everyone's,
	// no one's, or non-owners' (config/confine.go).
	WorkspaceOnly WorkspaceOnly `yaml:"workspace_only"`
	Sandbox       string        `yaml:"sandbox"` // auto|bwrap|off
	AllowNetwork  bool          `yaml:"allow_network"`
	Tools         []string      `yaml:"tools"`
	// SystemPromptFile replaces the default system prompt.
	SystemPromptFile string     `yaml:"system_prompt_file"`
	Approvals        Approvals  `yaml:"approvals"`
	Queue            Queue      `yaml:"queue"`
	Verbosity        string     `yaml:"verbosity"` // quiet|tools|verbose
	Compaction       Compaction `yaml:"compaction"`
	Retry            Retry      `yaml:"retry"`
	IdleEvict        Duration   `yaml:"idle_evict"`
	ToolTimeout      Duration   `yaml:"tool_timeout"`
	// MaxRun stops a run that lasts longer than this; 0 means no limit.
	MaxRun Duration `yaml:"max_run"`
	// MaxIdle stops a run when neither the model nor a tool produced an
	// event for this long; 0 means no limit.
	MaxIdle   Duration `yaml:"max_idle"`
	Fallbacks []string `yaml:"fallbacks"`
	// Limits are the resource limits of every bash call.
	Limits Limits `yaml:"limits"`
	// Skills are the operator's skill folders (or SKILL.md files) and
	// Prompts its prompt template folders, used as they are
	// (config/extend.go).
	Skills  []string `yaml:"skills"`
	Prompts []string `yaml:"prompts"`
	// WorkspacePi also reads the workspace's .pi/skills and .pi/prompts;
	// like its AGENTS.md, each file is used once an owner approved its
	// content.
	WorkspacePi bool `yaml:"workspace_pi"`
	// SystemPrompt is text added to the system prompt (after the
	// workspace's AGENTS.md and the skills).
	SystemPrompt string `yaml:"system_prompt"`
	// MCP lists the servers of mcp.servers this agent may use; unset:
	// all of them for a bare agent: block (no agents), none otherwise.
	MCP []string `yaml:"mcp"`
	// Hooks lists the hooks this agent runs; unset: all of them for a
	// bare agent: block (no agents), none otherwise.
	Hooks []string `yaml:"hooks"`
	// Spend caps this agent's daily model usage, with the names of the
	// top-level limits key; those still apply on top.
	Spend SpendLimits `yaml:"spend"`
	// Worktree "per_thread" gives each branch of a conversation (a
	// thread, a fork) a git worktree of the workspace, which must be a
	// git repository; "" or "off": the runs work in the workspace.
	Worktree string `yaml:"worktree"`
	// WorktreePruneAfter removes a worktree that was idle and clean this
	// long (its branch stays); 0: never. Default 7 days.
	WorktreePruneAfter Duration `yaml:"worktree_prune_after"`
}

// WorktreePerThread is the value of agents.NAME.worktree that gives each
// branch of a conversation a worktree of its own.
const WorktreePerThread = "per_thread"

// Approvals sets the per-tool policy (allow|ask|deny) in DMs and groups.
type Approvals struct {
	DM      map[string]string `yaml:"dm"`
	Group   map[string]string `yaml:"group"`
	Timeout Duration          `yaml:"timeout"`
}

// Queue sets what happens to a message sent while the agent works.
type Queue struct {
	Mode    string  `yaml:"mode"` // steer|followup|collect|interrupt
	Collect Collect `yaml:"collect"`
}

// Collect configures the collect queue mode.
type Collect struct {
	Debounce Duration `yaml:"debounce"`
	Cap      int      `yaml:"cap"`
	Drop     string   `yaml:"drop"` // old|new
}

// Compaction configures automatic context compaction.
type Compaction struct {
	Enabled          bool  `yaml:"enabled"`
	ReserveTokens    int64 `yaml:"reserve_tokens"`
	KeepRecentTokens int64 `yaml:"keep_recent_tokens"`
}

// Retry configures automatic retries of failed model calls.
type Retry struct {
	Enabled    bool     `yaml:"enabled"`
	MaxRetries int      `yaml:"max_retries"`
	BaseDelay  Duration `yaml:"base_delay"`
}

// Access says who may talk to the bot.
type Access struct {
	// Owners are "platform:user id" entries with full rights.
	Owners []string `yaml:"owners"`
	// Users are further allowed "platform:user id" entries.
	Users []string `yaml:"users"`
	// DMPolicy is pairing|allowlist|open|disabled.
	DMPolicy string `yaml:"dm_policy"`
	// Groups are allowed "platform:chat id" entries; "*" allows every group.
	Groups []string `yaml:"groups"`
	// MentionRequired gates group messages on a mention or reply.
	MentionRequired *bool `yaml:"mention_required"`
	// Budget is the per-sender message budget (owners are exempt).
	Budget Budget `yaml:"budget"`
	// SchedulesPerUser caps the schedules one user keeps, made with
	// /schedule over all conversations (owners are exempt); 0: no cap.
	SchedulesPerUser int `yaml:"schedules_per_user"`
}

// Budget is the per-sender message budget: a token bucket per sender
// that refills PerMinute tokens a minute up to Burst. A message over it
// is not processed and its sender is told; PerMinute 0 turns it off.
type Budget struct {
	PerMinute float64 `yaml:"per_minute"`
	Burst     int     `yaml:"burst"`
}

// Adapters configures each chat platform.
type Adapters struct {
	Telegram Telegram `yaml:"telegram"`
	Slack    Slack    `yaml:"slack"`
	Discord  Discord  `yaml:"discord"`
	Web      Web      `yaml:"web"`
}

// Telegram configures the Telegram adapter.
type Telegram struct {
	Token             string   `yaml:"token" secret:"value"`
	TokenFile         string   `yaml:"token_file" secret:"file"`
	APIURL            string   `yaml:"api_url" secret:"url"`
	Mode              string   `yaml:"mode"` // polling|webhook
	WebhookURL        string   `yaml:"webhook_url" secret:"url"`
	WebhookSecret     string   `yaml:"webhook_secret" secret:"value"`
	WebhookSecretFile string   `yaml:"webhook_secret_file" secret:"file"`
	AllowedUpdates    []string `yaml:"allowed_updates"`
}

// Slack configures the Slack adapter.
type Slack struct {
	// BotToken is the xoxb- bot token (OAuth & Permissions).
	BotToken     string `yaml:"bot_token" secret:"value"`
	BotTokenFile string `yaml:"bot_token_file" secret:"file"`
	// AppToken is the xapp- app-level token with connections:write
	// (Socket Mode).
	AppToken     string `yaml:"app_token" secret:"value"`
	AppTokenFile string `yaml:"app_token_file" secret:"file"`
	// SigningSecret verifies HTTP deliveries (http mode).
	SigningSecret     string `yaml:"signing_secret" secret:"value"`
	SigningSecretFile string `yaml:"signing_secret_file" secret:"file"`
	// Mode is socket (default) or http.
	Mode string `yaml:"mode"`
	// APIURL replaces https://slack.com/api/ (with a trailing slash).
	APIURL string `yaml:"api_url" secret:"url"`
	// Command is the slash command, default /pi.
	Command string `yaml:"command"`
}

// Discord configures the Discord adapter (adapters.discord.*).
type Discord struct {
	// Token is the bot token from the developer portal (or TokenFile).
	Token     string `yaml:"token" secret:"value"`
	TokenFile string `yaml:"token_file" secret:"file"`
	// APIURL replaces https://discord.com for every REST call; empty for
	// the real Discord.
	APIURL string `yaml:"api_url" secret:"url"`
	// ApplicationID is the application's id; empty: learned from READY.
	ApplicationID string `yaml:"application_id"`
	// Guilds are guild ids whose commands are registered per guild
	// (instantly); empty: global registration.
	Guilds []string `yaml:"guilds"`
	// Command is the application command's name; default "pi".
	Command string `yaml:"command"`
}

// Web configures the local web chat.
type Web struct {
	Enabled   *bool  `yaml:"enabled"`
	Token     string `yaml:"token" secret:"value"`
	TokenFile string `yaml:"token_file" secret:"file"`
}

// Provider configures one model provider.
type Provider struct {
	API        string            `yaml:"api"`
	BaseURL    string            `yaml:"base_url" secret:"url"`
	APIKey     string            `yaml:"api_key" secret:"value"`
	APIKeyFile string            `yaml:"api_key_file" secret:"file"`
	Headers    map[string]string `yaml:"headers" secret:"value"`
	Compat     map[string]any    `yaml:"compat"`
	Models     []Model           `yaml:"models"`
	// Timeouts bound every call to this provider.
	Timeouts ProviderTimeouts `yaml:"timeouts"`
	// Script is what a faux provider answers, one turn per model call,
	// then it echoes. Only for api: faux.
	Script []FauxTurn `yaml:"script"`
}

// ProviderTimeouts bound the phases of a model call; zero means the
// default (connect 30s, first_byte 10m, idle 2m).
type ProviderTimeouts struct {
	// Connect bounds DNS, TCP and TLS until a connection is ready.
	Connect Duration `yaml:"connect"`
	// FirstByte bounds the wait from sending the request to the first
	// stream event: a reasoning model may think this long before it
	// sends anything.
	FirstByte Duration `yaml:"first_byte"`
	// Idle bounds the silence between two stream events.
	Idle Duration `yaml:"idle"`
}

func (t ProviderTimeouts) validate(key string, bad func(key, format string, args ...any)) {
	for _, f := range []struct {
		name string
		d    Duration
	}{{"connect", t.Connect}, {"first_byte", t.FirstByte}, {"idle", t.Idle}} {
		if f.d < 0 {
			bad(key+"."+f.name, "must not be negative (0 or unset: the default)")
		}
	}
}

// FauxTurn is one scripted answer of a faux model.
type FauxTurn struct {
	Text      string         `yaml:"text"`
	Thinking  string         `yaml:"thinking"`
	ToolCalls []FauxToolCall `yaml:"tool_calls"`
	Error     string         `yaml:"error"`
	// Delay is waited before every streamed token.
	Delay Duration `yaml:"delay"`
}

// FauxToolCall is a scripted tool call; Args is a JSON object.
type FauxToolCall struct {
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args"`
}

// Model describes one model of a provider.
type Model struct {
	ID            string             `yaml:"id"`
	Name          string             `yaml:"name"`
	ContextWindow int64              `yaml:"context_window"`
	MaxTokens     int64              `yaml:"max_tokens"`
	Reasoning     bool               `yaml:"reasoning"`
	ThinkingMap   map[string]*string `yaml:"thinking_map"`
	Input         []string           `yaml:"input"`
	Cost          ModelCost          `yaml:"cost"`
}

// ModelCost is a price in US dollars per million tokens.
type ModelCost struct {
	Input      float64 `yaml:"input"`
	Output     float64 `yaml:"output"`
	CacheRead  float64 `yaml:"cache_read"`
	CacheWrite float64 `yaml:"cache_write"`
}

// Duration is a time.Duration written as "500ms", "10m".
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Default returns the configuration used when no file is given.
func Default() Config {
	return Config{
		DataDir: "./pibot-data",
		Log:     Log{Level: "info", Format: "text"},
		HTTP:    HTTP{Listen: "127.0.0.1:8080"},
		Agent: Agent{
			Thinking:      "off",
			Workspace:     "./pibot-workspace",
			WorkspaceOnly: WorkspaceOnlyNonOwners,
			Sandbox:       "auto",
			Tools:         []string{"read", "write", "edit", "bash", "grep", "find", "ls", "attach"},
			Approvals: Approvals{
				DM:      map[string]string{},
				Group:   map[string]string{"bash": "ask", "write": "ask", "edit": "ask", "attach": "ask"},
				Timeout: Duration(10 * time.Minute),
			},
			Queue:      Queue{Mode: "steer", Collect: Collect{Debounce: Duration(500 * time.Millisecond), Cap: 20, Drop: "old"}},
			Verbosity:  "tools",
			Compaction: Compaction{Enabled: true, ReserveTokens: 16384, KeepRecentTokens: 20000},
			Retry:      Retry{Enabled: true, MaxRetries: 3, BaseDelay: Duration(2 * time.Second)},
			IdleEvict:  Duration(10 * time.Minute),
			// A week idle and clean; the branch stays.
			WorktreePruneAfter: Duration(7 * 24 * time.Hour),
			MaxRun:             Duration(2 * time.Hour),
			MaxIdle:            Duration(15 * time.Minute),
			Limits:             DefaultLimits(),
		},
		Access:  Access{DMPolicy: "pairing", Budget: Budget{PerMinute: 20, Burst: 10}, SchedulesPerUser: 10},
		Cluster: Cluster{LeaseTTL: Duration(15 * time.Second), KeyPrefix: "pibot:"},
	}
}
