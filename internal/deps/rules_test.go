package deps

// A rule is what one package of the module may import. Module packages are
// named relative to the module ("gateway/stream"); an entry ending in "/..."
// covers a package and everything below it. Entries whose first element has
// a dot are third-party module paths and cover every package of the module.
type rule struct {
	pkg      string   // the package, exactly
	may      []string // direct imports allowed (besides the standard library)
	test     []string // further direct imports allowed in its _test.go files
	never    []string // never reached, directly or transitively
	testOnly bool     // test support: production code and commands never reach it
	why      string   // printed with every failure
}

// Third-party modules that the layers must keep apart.
const (
	telegramSDK  = "github.com/go-telegram/bot"
	slackSDK     = "github.com/slack-go/slack"
	discordSDK   = "github.com/bwmarrin/discordgo"
	anthropicSDK = "github.com/anthropics/anthropic-sdk-go" // replaced by providers/anthropic's own client (issue #15); kept out
	openaiSDK    = "github.com/openai/openai-go"
	redis        = "github.com/redis"
	miniredis    = "github.com/alicebob/miniredis"
	chromedp     = "github.com/chromedp"
	goldmark     = "github.com/yuin/goldmark"
	yaml         = "go.yaml.in/yaml"
	xsys         = "golang.org/x/sys"
	xsync        = "golang.org/x/sync"
	prometheus   = "github.com/prometheus/client_golang"
	websocket    = "github.com/gorilla/websocket"
	mcpSDK       = "github.com/modelcontextprotocol/go-sdk"
	cronParser   = "github.com/robfig/cron/v3"
)

var (
	platformSDKs = []string{telegramSDK, slackSDK, discordSDK}
	modelSDKs    = []string{anthropicSDK, openaiSDK}
	// sdks is what no layer below cmd/pibot, other than the one adapter or
	// provider that wraps it, may reach.
	sdks = join(platformSDKs, modelSDKs, []string{redis, chromedp})
)

// join concatenates lists into a new slice.
func join(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Reasons shared by several rules.
const (
	whyAdapter  = "adapters know the chat contract and their own SDK only: no gateway, agent, session, provider, tool or cluster"
	whyProvider = "a provider speaks one model API in llm terms: no chat, session, gateway or other provider's SDK"
	whyTestPkg  = "test support mirrors the package it fakes and never reaches the binary"
	whyTool     = "the sandbox layer under tools: process confinement only, no tool, chat or agent logic"
	whyStdlib   = "a leaf utility: stdlib (and x/sys) only, so any layer can use it"
)

// rules is the allow-list. Keep it in the order of docs/architecture.md:
// vocabulary, core, platforms, gateway, wiring, internal, test support.
var rules = []rule{
	// The vocabulary every layer shares.
	{pkg: "llm", never: sdks,
		why: "llm is the vocabulary of models, messages and tools: stdlib only, so every layer can use it"},
	{pkg: "chat", may: []string{goldmark},
		never: join(sdks, []string{"gateway/...", "agent/...", "session/...", "adapters/...", "providers/...", "tools/...", "cluster"}),
		why:   "chat is the adapter contract: stdlib and goldmark only, never a platform SDK"},
	{pkg: "config", may: []string{yaml}, never: sdks,
		why: "config is the YAML schema: stdlib and yaml only"},

	// The core: agent, sessions, tools, providers.
	{pkg: "agent", may: []string{"llm", "agent/compaction", "internal/backoff"},
		never: join(sdks, []string{"gateway/...", "session/...", "chat/...", "adapters/...", "tools/...", "providers/...", "cluster"}),
		why:   "the agent loop knows models and tools only through llm and its own interfaces: no chat, session or gateway"},
	{pkg: "agent/compaction", may: []string{"llm"},
		test:  []string{"agent/agenttest"},
		never: join(sdks, []string{"agent", "gateway/...", "session/...", "chat/...", "adapters/...", "tools/...", "providers/...", "cluster"}),
		why:   "compaction summarises llm messages; it knows neither the agent loop nor the session format"},
	{pkg: "agent/skills", may: []string{yaml},
		never: join(sdks, []string{"agent", "gateway/...", "session/...", "chat/...", "adapters/...", "tools/...", "providers/...", "cluster"}),
		why:   "skills and prompt templates are files read by pi's rules: front matter (yaml), nothing else"},
	{pkg: "agent/hooks", may: []string{"agent", "llm"},
		never: join(sdks, []string{"gateway/...", "session/...", "chat/...", "adapters/...", "tools/...", "providers/...", "cluster"}),
		why:   "hooks speak JSON lines to an operator's process and plug into the agent loop's hooks; no chat, no session"},
	{pkg: "session", may: []string{"llm", "internal/fsync", xsys},
		never: join(sdks, []string{"gateway/...", "agent/...", "chat/...", "adapters/...", "tools/...", "providers/...", "cluster"}),
		why:   "the session store is pure storage: no chat, no agent, no Redis"},
	{pkg: "tools", may: []string{"llm", "tools/jail", "tools/sandbox", xsys}, test: []string{"internal/tinyfs"},
		never: join(sdks, []string{"gateway/...", "agent/...", "session/...", "chat/...", "adapters/...", "providers/...", "cluster"}),
		why:   "tools implement agent.Tool structurally (without importing agent) and know no chat"},
	{pkg: "tools/mcp", may: []string{"llm", "internal/backoff", "internal/secret", mcpSDK},
		never: join(sdks, []string{"gateway/...", "agent/...", "session/...", "chat/...", "adapters/...", "providers/...", "cluster"}),
		why:   "MCP servers' tools implement agent.Tool structurally through the MCP SDK; they know no chat"},
	{pkg: "tools/jail", may: []string{xsys}, test: []string{"tools/jail/jailtest"},
		never: join(sdks, []string{"tools", "agent/...", "chat/...", "gateway/..."}), why: whyTool},
	{pkg: "tools/jail/jailtest", testOnly: true, never: sdks,
		why: "test support: a pids cgroup with a small budget for a test to run pibot in (stdlib only)"},
	{pkg: "tools/sandbox", may: []string{"internal/atomicfile"},
		never: join(sdks, []string{"tools", "agent/...", "chat/...", "gateway/..."}), why: whyTool},
	{pkg: "providers", may: []string{"llm", "internal/secret", "providers/anthropic", "providers/openai", "providers/faux", "providers/internal/..."},
		never: join(platformSDKs, []string{redis, chromedp, "gateway/...", "agent/...", "session/...", "chat/...", "adapters/...", "tools/...", "cluster"}),
		why:   "the provider registry builds models from configuration; it knows no chat, session or agent"},
	{pkg: "providers/anthropic", may: []string{"llm", "internal/secret", "providers/internal/..."},
		test:  []string{"providers/providertest"},
		never: join(platformSDKs, []string{openaiSDK, redis, chromedp, "gateway/...", "agent/...", "session/...", "chat/..."}),
		why:   whyProvider},
	{pkg: "providers/openai", may: []string{"llm", "internal/secret", "providers/internal/...", openaiSDK},
		test:  []string{"providers/providertest"},
		never: join(platformSDKs, []string{anthropicSDK, redis, chromedp, "gateway/...", "agent/...", "session/...", "chat/..."}),
		why:   whyProvider},
	{pkg: "providers/faux", may: []string{"llm", "providers/internal/assemble"},
		never: join(sdks, []string{"gateway/...", "agent/...", "session/...", "chat/..."}),
		why:   "the scripted model speaks llm like a real provider (it ships in the binary for demos and the end-to-end tests)"},
	{pkg: "providers/internal/assemble", may: []string{"llm", "providers/internal/partialjson"}, never: sdks,
		why: "assembles streamed llm messages for every provider: no SDK"},
	{pkg: "providers/internal/partialjson", never: sdks, why: whyStdlib},
	{pkg: "providers/internal/transform", may: []string{"llm"}, never: sdks,
		why: "rewrites llm messages for a provider's rules: no SDK"},
	{pkg: "providers/internal/transport", may: []string{"llm", "internal/backoff", "internal/secret"}, never: sdks,
		why: "the HTTP transport shared by providers: retries and redaction, no SDK"},

	// The platforms.
	{pkg: "adapters/telegram", may: []string{"chat", "internal/backoff", "internal/secret", "internal/tokenbucket", telegramSDK}, test: []string{"chat/adaptertest"},
		never: join(modelSDKs, []string{slackSDK, discordSDK, redis, chromedp, "gateway/...", "agent/...", "session/...", "providers/...", "tools/...", "cluster"}),
		why:   whyAdapter},
	{pkg: "adapters/discord", may: []string{"chat", "internal/backoff", "internal/atomicfile", "internal/secret", "internal/tokenbucket", discordSDK, websocket},
		test:  []string{"chat/adaptertest", "adapters/discord/discordtest"},
		never: join(modelSDKs, []string{telegramSDK, slackSDK, redis, chromedp, "gateway/...", "agent/...", "session/...", "providers/...", "tools/...", "cluster"}),
		why:   whyAdapter + " (its gateway client speaks the websocket itself)"},
	{pkg: "adapters/slack", may: []string{"chat", "internal/backoff", "internal/secret", "internal/tokenbucket", slackSDK}, test: []string{"chat/adaptertest"},
		never: join(modelSDKs, []string{telegramSDK, discordSDK, redis, chromedp, "gateway/...", "agent/...", "session/...", "providers/...", "tools/...", "cluster"}),
		why:   whyAdapter},
	{pkg: "adapters/web", may: []string{"chat", "internal/secret"}, test: []string{chromedp, "chat/adaptertest", "adapters/web/webtest"},
		never: join(sdks, []string{"gateway/...", "agent/...", "session/...", "providers/...", "tools/...", "cluster"}),
		why:   whyAdapter},
	{pkg: "adapters/term", may: []string{"chat"}, test: []string{"chat/adaptertest", "adapters/term/termtest"},
		never: join(sdks, []string{"gateway/...", "agent/...", "session/...", "providers/...", "tools/...", "cluster"}),
		why:   whyAdapter},

	// The gateway and what it stands on.
	{pkg: "gateway",
		may: []string{"agent", "agent/compaction", "chat", "cluster", "gateway/access", "gateway/spend", "gateway/stream", "llm", "session",
			"internal/atomicfile", "internal/crashpoint", "internal/groupsync", "internal/otlp", "internal/sessionrun", "internal/worktree", "gateway/schedule", "gateway/binding", prometheus},
		test: []string{"providers/faux", "internal/tinyfs", "internal/extensions", "agent/hooks", "agent/skills",
			"cluster/rediscluster", "cluster/rediscluster/redistest"}, // the cluster mode benchmarks
		never: join(sdks, []string{"adapters/...", "providers/...", "tools/..."}),
		why:   "the gateway joins chat, agent, sessions and cluster through interfaces: it never names a platform SDK, a provider or a tool"},
	{pkg: "gateway/schedule", may: []string{"internal/atomicfile", cronParser},
		never: join(sdks, []string{"gateway", "agent/...", "session/...", "adapters/...", "providers/...", "tools/...", "chat"}),
		why:   "schedules are stored and fired through a function: they know no chat, session or agent"},
	{pkg: "gateway/binding",
		never: join(sdks, []string{"gateway", "agent/...", "session/...", "chat/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "bindings choose an agent from plain strings: they know no chat, session or agent type"},
	{pkg: "gateway/access", may: []string{"chat", "internal/atomicfile"}, test: []string{"gateway/access/accesstest"},
		never: join(sdks, []string{"gateway", "agent/...", "session/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "access decides who may talk from chat types alone"},
	{pkg: "gateway/spend", may: []string{"internal/atomicfile"}, test: []string{"gateway/spend/spendtest"},
		never: join(sdks, []string{"gateway", "agent/...", "session/...", "chat/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "spend counts usage against caps from plain numbers; a shared store implements its Store"},
	{pkg: "gateway/stream", may: []string{"chat", "internal/backoff", "internal/tokenbucket"},
		never: join(sdks, []string{"gateway", "agent/...", "session/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "the stream controller drives a chat.Adapter and knows nothing of runs or sessions"},
	{pkg: "cluster", may: []string{"internal/atomicfile", "internal/crashpoint", "internal/groupsync", "internal/tokenbucket", xsys}, test: []string{"cluster/clustertest"},
		never: join(sdks, []string{"gateway/...", "agent/...", "chat/...", "session/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "cluster primitives are generic (keys, bytes, leases): no chat, session or agent type; the embedded inbox's compaction steps are crash points"},
	{pkg: "cluster/rediscluster", may: []string{"cluster", "internal/tokenbucket", redis}, test: []string{"cluster/clustertest", "cluster/rediscluster/redistest", miniredis},
		never: join(platformSDKs, modelSDKs, []string{chromedp, "gateway/...", "agent/...", "chat/...", "session/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "the Redis implementations of the cluster seams are as generic as cluster itself: keys, bytes and leases on go-redis"},
	{pkg: "cluster/rediscluster/redispairing", may: []string{"cluster/rediscluster", "gateway/access", redis},
		test:  []string{"cluster/rediscluster/redistest", "gateway/access/accesstest"},
		never: join(platformSDKs, modelSDKs, []string{chromedp, "gateway", "agent/...", "session/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "the shared pairing store keeps access's records in Redis and knows nothing else"},
	{pkg: "cluster/rediscluster/redisspend", may: []string{"cluster/rediscluster", "gateway/spend", redis},
		test:  []string{"cluster/rediscluster/redistest", "gateway/spend/spendtest"},
		never: join(platformSDKs, modelSDKs, []string{chromedp, "gateway", "agent/...", "session/...", "adapters/...", "providers/...", "tools/..."}),
		why:   "the shared spend store keeps spend's counts and overrides in Redis and knows nothing else"},

	// The wiring.
	{pkg: "cmd/pibot",
		may: []string{"adapters/...", "agent/...", "chat", "cluster", "cluster/rediscluster", "cluster/rediscluster/redispairing", "cluster/rediscluster/redisspend", redis, "config", "gateway/...", "internal/buildinfo", "internal/crashpoint", "internal/doctor", "internal/extensions", "internal/otlp", "internal/secret", "internal/sessionrun", "internal/tokenbucket",
			"internal/transcript", "internal/worktree", "llm", "providers", "providers/faux", "session", "tools/...", prometheus, yaml, xsys, xsync},
		test: []string{"adapters/telegram/telegramtest", "cluster/rediscluster/redistest", "internal/tinyfs", mcpSDK, telegramSDK},
		why:  "cmd/pibot wires the layers together; only it sees every layer (its tests run an MCP server; a crashpoints build's knobs come from internal/crashpoint)"},

	// Internal helpers.
	{pkg: "internal/atomicfile", never: sdks, why: whyStdlib},
	{pkg: "internal/crashpoint", never: sdks, why: whyStdlib + " (its points are no-ops unless built with the crashpoints tag, for e2e's crash-point suite)"},
	{pkg: "internal/fsync", may: []string{xsys}, never: sdks, why: whyStdlib},
	{pkg: "internal/tokenbucket", never: sdks, why: whyStdlib},
	{pkg: "internal/backoff", never: sdks, why: whyStdlib},
	{pkg: "internal/worktree", may: []string{"internal/atomicfile"}, never: sdks,
		why: "git worktrees of conversations: runs git itself, knows no chat, session or gateway"},
	{pkg: "internal/buildinfo", never: sdks, why: whyStdlib},
	{pkg: "internal/otlp", never: sdks, why: whyStdlib + " (a hand-written OTLP/HTTP JSON exporter instead of the OpenTelemetry SDK)"},
	{pkg: "internal/doctor", test: []string{"adapters/telegram/telegramtest", "internal/tinyfs"}, never: sdks,
		why: "doctor speaks each service's wire protocol with the standard library: no SDK, no other pibot package"},
	{pkg: "internal/extensions", may: []string{"agent", "agent/hooks", "agent/skills", "chat", "internal/atomicfile", "llm"},
		never: join(sdks, []string{"gateway/...", "session/...", "adapters/...", "providers/...", "tools/...", "cluster"}),
		why:   "extensions join skills, templates and hooks for the gateway and pibot chat, which consume them through their own interfaces; the approved workspace files are one atomically replaced file"},
	{pkg: "internal/groupsync", may: []string{"internal/fsync"}, test: []string{"internal/tinyfs"}, never: sdks, why: whyStdlib},
	{pkg: "internal/secret", may: []string{xsys}, never: sdks, why: whyStdlib},
	{pkg: "internal/sessionrun", may: []string{"agent", "agent/compaction", "llm", "session"}, test: []string{"providers/faux"},
		never: join(sdks, []string{"gateway/...", "chat/...", "adapters/...", "providers/...", "tools/...", "cluster"}),
		why:   "sessionrun is the one place where sessions and the agent meet, shared by the gateway and pibot chat"},
	{pkg: "internal/transcript", may: []string{"chat", "llm", "session", goldmark}, test: []string{chromedp},
		never: join(sdks, []string{"gateway/...", "adapters/...", "agent/...", "providers/...", "tools/...", "cluster"}),
		why:   "transcript renders a session file for people (Markdown, HTML through goldmark), naming turns as chat's /tree does; its tests load the page in a browser"},
	{pkg: "internal/tinyfs", may: []string{xsys}, testOnly: true,
		why: "tinyfs mounts small file systems for tests and imports testing"},
	{pkg: "internal/deps", testOnly: true, why: "this test"},
	{pkg: "deploy", testOnly: true, test: []string{"config", "tools/jail", yaml},
		why: "deploy holds the Dockerfile's, the service unit's and the release script's checks (task limits against the jail's reserve): tests only"},

	// Test support, end-to-end tests, benchmarks and compatibility tools.
	{pkg: "chat/chattest", may: []string{"chat"}, test: []string{"chat/adaptertest"}, testOnly: true, why: whyTestPkg},
	{pkg: "chat/adaptertest", may: []string{"chat"}, testOnly: true,
		why: "the adapter conformance suite drives any chat.Adapter through the contract alone"},
	{pkg: "agent/agenttest", may: []string{"llm"}, testOnly: true, why: whyTestPkg},
	{pkg: "session/sessiontest", may: []string{"llm", "session"}, testOnly: true, why: whyTestPkg},
	{pkg: "gateway/access/accesstest", may: []string{"gateway/access"}, testOnly: true,
		why: "the pairing store conformance suite drives a store through access's types alone"},
	{pkg: "gateway/spend/spendtest", may: []string{"gateway/spend"}, testOnly: true,
		why: "the spend store conformance suite drives a store through spend's types alone"},
	{pkg: "cluster/clustertest", may: []string{"cluster", "internal/tokenbucket"}, testOnly: true,
		why: "the cluster conformance suite drives any locker, inbox, dedupe or budget through the cluster types alone"},
	{pkg: "cluster/rediscluster/redistest", may: []string{redis, miniredis}, testOnly: true,
		why: "the Redis servers of the tests: miniredis, the real redis-server, private ones to kill"},
	{pkg: "tools/toolstest", testOnly: true, why: whyTestPkg},
	{pkg: "providers/providertest", may: []string{"llm"}, testOnly: true, why: whyTestPkg},
	{pkg: "adapters/telegram/telegramtest", may: []string{telegramSDK}, testOnly: true,
		why: "the fake Bot API speaks Telegram's wire format (SDK models only), not pibot's"},
	{pkg: "adapters/discord/discordtest", may: []string{websocket}, testOnly: true,
		why: "the fake Discord speaks Discord's wire format (REST JSON and the gateway websocket), not pibot's"},
	{pkg: "adapters/slack/slacktest", may: []string{slackSDK, websocket}, testOnly: true,
		why: "the fake Slack speaks Slack's wire formats (Web API, Socket Mode, signed HTTP events), not pibot's"},
	{pkg: "adapters/term/termtest", testOnly: true,
		why: "the screen emulator reads ANSI bytes, as a terminal does, not pibot's types"},
	{pkg: "adapters/web/webtest", testOnly: true,
		why: "the fake bus carries the web chat's events as opaque bytes, like the Redis channel it stands for"},
	{pkg: "e2e", testOnly: true,
		test: []string{"adapters/...", "agent/...", "chat/...", "cluster", "config", "gateway/...", "internal/crashpoint", "internal/secret", "internal/tinyfs",
			"internal/extensions", "llm", "providers/...", "session/...", "tools/...", "cluster/rediscluster/redistest", telegramSDK, slackSDK, chromedp, redis},
		why: "end-to-end tests drive the real layers from the outside (and read the leases in the real Redis)"},
	{pkg: "bench/startup", testOnly: true, why: "times whole-process start-up of built binaries from outside: stdlib only"},
	{pkg: "bench/gateway/serveprobe", testOnly: true, why: "the probe runs the binary from outside: stdlib only"},
	{pkg: "bench/sessions/ctx", may: []string{"llm", "session"}, testOnly: true, why: "the session benchmark times the session package alone"},
	{pkg: "bench/sessions/gen", may: []string{"session/sessiontest"}, testOnly: true, why: "the generator writes session files through sessiontest"},
	{pkg: "compat/cmd/writesessions", may: []string{"llm", "session"}, testOnly: true,
		why: "the pi compatibility check writes sessions with the session package alone"},
}
