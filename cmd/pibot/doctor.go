package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/adapters/discord"
	"github.com/pibot/pibot/adapters/slack"
	"github.com/pibot/pibot/adapters/telegram"
	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/doctor"
	"github.com/pibot/pibot/providers"
	"github.com/pibot/pibot/tools/mcp"
	"github.com/pibot/pibot/tools/sandbox"
)

// runDoctor runs `pibot doctor [-c FILE] [--timeout D]`: it checks the
// configuration, then every configured credential against its service,
// Redis, the data directory and workspace, and the sandbox, printing one
// line per check with what to fix. It exits 1 when anything fails.
func runDoctor(ctx context.Context, c *cli, args []string) error {
	fs := c.newFlags("doctor")
	file := configFlag(fs)
	timeout := fs.Duration("timeout", doctor.DefaultTimeout, "bound of each network check")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs("doctor", pos, 0, "no arguments besides -c FILE"); err != nil {
		return err
	}
	cfg, path, err := c.loadConfig(*file)
	if err != nil {
		// Nothing else can be checked without a valid configuration.
		var findings []doctor.Finding
		for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
			findings = append(findings, doctor.Finding{Check: "config", Status: doctor.Fail, Detail: strings.TrimSpace(line),
				Fix: "edit the file (`pibot config example` documents every key)"})
		}
		doctor.Report(c.stdout, findings)
		return &exitError{code: 1}
	}
	if path == "" {
		path = "no file: built-in defaults"
	}
	findings := []doctor.Finding{{Check: "config", Status: doctor.OK, Detail: path}}
	var stops sync.WaitGroup // the MCP servers doctor started, stopping
	findings = append(findings, doctor.Run(ctx, doctorChecks(cfg, c.getenv, &stops), *timeout)...)
	defer stops.Wait()
	if fails, _ := doctor.Report(c.stdout, findings); fails > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// doctorChecks turns a valid configuration into the checks of its parts.
// The MCP servers it starts are stopped under stops.
func doctorChecks(cfg config.Config, getenv func(string) string, stops *sync.WaitGroup) []doctor.Check {
	checks := platformChecks(cfg)
	checks = append(checks, providerChecks(cfg, getenv)...)
	checks = append(checks, doctor.Check{Name: "model", Run: func(context.Context) doctor.Finding { return modelFinding(cfg, getenv) }})
	checks = append(checks, doctor.Check{Name: "http", Run: func(context.Context) doctor.Finding { return httpFinding(cfg) }})
	checks = append(checks, mcpChecks(cfg, stops)...)
	if cfg.Cluster.RedisURL != "" {
		checks = append(checks, doctor.Redis("redis", cfg.Cluster.RedisURL, "cluster.redis_url"))
	}
	checks = append(checks, doctor.DataDir("data_dir", cfg.DataDir, "data_dir", doctor.MinFree))
	checks = append(checks,
		doctor.Check{Name: "workspace", Run: func(ctx context.Context) doctor.Finding { return workspaceFinding(ctx, cfg) }})
	// Each further agent's workspace, as serve prepares it.
	for _, name := range cfg.AgentNames()[1:] {
		view := agentView(cfg, name)
		checks = append(checks, doctor.Check{Name: "workspace " + name, Run: func(ctx context.Context) doctor.Finding {
			f := workspaceFinding(ctx, view)
			f.Check = "workspace " + name
			f.Fix = strings.ReplaceAll(f.Fix, "agent.", config.AgentKey(name)+".")
			return f
		}})
	}
	checks = append(checks,
		doctor.Check{Name: "sandbox", Run: func(ctx context.Context) doctor.Finding { return sandboxFinding(ctx, cfg) }})
	return checks
}

// platformChecks tries each enabled chat platform's tokens, read as serve
// reads them (inline or from their files: adapterconfig.go), at the API
// root its adapter resolves from api_url.
func platformChecks(cfg config.Config) []doctor.Check {
	var checks []doctor.Check
	if cfg.Adapter.Telegram.Enabled() {
		tc, err := telegramConfig(cfg)
		root, rerr := telegram.APIRoot(tc.APIURL)
		checks = append(checks, credCheck(doctor.Telegram, errors.Join(err, rerr), doctor.Cred{Name: "telegram", URL: root,
			Token: tc.Token.Reveal(), Key: "adapters.telegram.token", URLKey: "adapters.telegram.api_url"}))
	}
	if cfg.Adapter.Slack.Enabled() {
		sc, err := slackConfig(cfg)
		root, rerr := slack.APIRoot(sc.APIURL)
		err = errors.Join(err, rerr)
		checks = append(checks, credCheck(doctor.Slack, err, doctor.Cred{Name: "slack", URL: root,
			Token: sc.BotToken.Reveal(), Key: "adapters.slack.bot_token", URLKey: "adapters.slack.api_url"}))
		if sc.Mode != slack.ModeHTTP && err == nil {
			checks = append(checks, doctor.SlackApp(doctor.Cred{Name: "slack app token", URL: root,
				Token: sc.AppToken.Reveal(), Key: "adapters.slack.app_token", URLKey: "adapters.slack.api_url"}))
		}
	}
	if cfg.Adapter.Discord.Enabled() {
		dc, err := discordConfig(cfg)
		root, rerr := discord.APIRoot(dc.APIURL)
		checks = append(checks, credCheck(doctor.Discord, errors.Join(err, rerr), doctor.Cred{Name: "discord", URL: root,
			Token: dc.Token.Reveal(), Key: "adapters.discord.token", URLKey: "adapters.discord.api_url"}))
	}
	return checks
}

// credCheck is check(cred), or a failing check when the credential could
// not be resolved (a missing *_file, a bad api_url).
func credCheck(check func(doctor.Cred) doctor.Check, err error, cred doctor.Cred) doctor.Check {
	if err != nil {
		return doctor.Check{Name: cred.Name, Run: func(context.Context) doctor.Finding {
			var ce *config.Error
			if errors.As(err, &ce) && strings.HasSuffix(ce.Key, "_file") {
				return doctor.Finding{Status: doctor.Fail, Detail: ce.Error(), Fix: "make the file readable by the user pibot runs as"}
			}
			if errors.As(err, &ce) {
				return configFinding(err, cred.Key)
			}
			return configFinding(err, cred.URLKey) // the adapter refused api_url
		}}
	}
	return check(cred)
}

// providerChecks lists each model provider's models with its key.
func providerChecks(cfg config.Config, getenv func(string) string) []doctor.Check {
	pcs, err := providerConfigs(cfg, getenv)
	if err != nil {
		return []doctor.Check{failing("providers", err.Error(), "fix the provider's key or file")}
	}
	if len(pcs) == 0 {
		return []doctor.Check{failing("providers", "no model provider configured",
			"set OPENAI_API_KEY or ANTHROPIC_API_KEY, or configure providers.<name> and agent.model")}
	}
	var checks []doctor.Check
	for _, p := range pcs {
		key, urlKey := "providers."+p.Name+".api_key", "providers."+p.Name+".base_url"
		if _, ok := cfg.Providers[p.Name]; !ok {
			// A built-in provider from the environment.
			key, urlKey = strings.ToUpper(p.Name)+"_API_KEY", strings.ToUpper(p.Name)+"_BASE_URL"
		}
		cred := doctor.Cred{Name: "provider " + p.Name, URL: p.Root(), Token: p.APIKey.Reveal(), Key: key, URLKey: urlKey, Headers: p.Headers}
		switch p.API {
		case providers.APIOpenAICompletions, providers.APIOpenAIResponses:
			var want []string
			for _, m := range p.Models {
				want = append(want, m.ID)
			}
			if _, ok := cfg.Providers[p.Name]; !ok {
				want = nil // the built-in catalogue need not match every account
			}
			checks = append(checks, doctor.OpenAIModels(cred, want))
		case providers.APIAnthropic:
			checks = append(checks, doctor.AnthropicModels(cred))
		case providers.APIFaux:
			checks = append(checks, doctor.Check{Name: cred.Name, Run: func(context.Context) doctor.Finding {
				return doctor.Finding{Status: doctor.OK, Detail: "scripted faux model: nothing to reach"}
			}})
		default:
			checks = append(checks, failing(cred.Name, fmt.Sprintf("unknown api %q", p.API),
				"set providers."+p.Name+".api to openai-completions, openai-responses, anthropic-messages or faux"))
		}
	}
	return checks
}

// modelFinding checks that agent.model (or the model picked without it)
// and every fallback name a configured model.
func modelFinding(cfg config.Config, getenv func(string) string) doctor.Finding {
	reg, err := newRegistry(cfg, getenv, slog.New(slog.DiscardHandler), 0)
	if err != nil {
		return configFinding(err, "providers")
	}
	ref := defaultModel(cfg, reg)
	if ref == "" {
		return doctor.Finding{Status: doctor.Fail, Detail: "no model to answer with",
			Fix: "set agent.model (provider/model) or OPENAI_API_KEY / ANTHROPIC_API_KEY"}
	}
	keys := []string{"agent.model"}
	refs := []string{ref}
	for i, f := range cfg.Agent.Fallbacks {
		keys, refs = append(keys, fmt.Sprintf("agent.fallbacks[%d]", i)), append(refs, f)
	}
	for i, r := range refs {
		if _, err := reg.Model(r); err != nil {
			return doctor.Finding{Status: doctor.Fail, Detail: fmt.Sprintf("%s %s: %v", keys[i], r, err),
				Fix: "name a model of providers.<name>.models (`pibot models` lists them)"}
		}
	}
	return doctor.Finding{Status: doctor.OK, Detail: strings.Join(refs, ", ")}
}

// httpFinding checks what serve checks before it listens: the tokens that
// guard a non-loopback http.listen.
func httpFinding(cfg config.Config) doctor.Finding {
	if cfg.WebEnabled() {
		if _, err := webToken(cfg); err != nil {
			return configFinding(err, "adapters.web.token")
		}
	}
	if _, err := metricsHandler(cfg, http.NotFoundHandler()); err != nil {
		return configFinding(err, "http.metrics_token")
	}
	return doctor.Finding{Status: doctor.OK, Detail: "listen " + cfg.HTTP.Listen}
}

// failing is a check that fails with detail.
func failing(name, detail, fix string) doctor.Check {
	return doctor.Check{Name: name, Run: func(context.Context) doctor.Finding {
		return doctor.Finding{Status: doctor.Fail, Detail: detail, Fix: fix}
	}}
}

// workspaceFinding checks the workspace as serve prepares it (it must
// exist unless it is the default, which is created, and must not hold
// pibot's own files) and that it is writable.
func workspaceFinding(ctx context.Context, cfg config.Config) doctor.Finding {
	ws, _, err := prepareWorkspace(cfg)
	if err != nil {
		return configFinding(err, "agent.workspace")
	}
	f := doctor.Run(ctx, []doctor.Check{doctor.DataDir("workspace", ws, "agent.workspace", 0)}, 0)[0]
	// One file system for both is the quick start's layout: the disk
	// reserve keeps the tools from filling it, so only a reserve of 0 is
	// worth a warning; otherwise the detail says how it is kept apart.
	if shared := sharedFileSystem(ws, cfg.DataDir, cfg.Agent.Limits.DiskReserve); shared != "" && f.Status == doctor.OK {
		f.Detail += "; " + shared
		if cfg.Agent.Limits.DiskReserve <= 0 {
			f.Status = doctor.Warn
			f.Fix = "put agent.workspace on a file system of its own (a partition, a volume, a loop device), or set agent.limits.disk_reserve"
		}
	}
	return f
}

// sandboxFinding probes bubblewrap as serve does: a failure where
// agent.sandbox is bwrap, a warning where auto falls back to running bash
// unsandboxed.
func sandboxFinding(ctx context.Context, cfg config.Config) doctor.Finding {
	const fix = "install bubblewrap and allow unprivileged user namespaces (README: Running in production)"
	mode, err := sandbox.ParseMode(cfg.Agent.Sandbox)
	if err != nil {
		return doctor.Finding{Status: doctor.Fail, Detail: err.Error(), Fix: "fix agent.sandbox"}
	}
	_, deny, err := prepareWorkspace(cfg)
	if err != nil {
		return configFinding(err, "agent.workspace")
	}
	sb, err := sandbox.New(ctx, mode, deny)
	switch {
	case err != nil:
		return doctor.Finding{Status: doctor.Fail, Detail: err.Error(), Fix: fix + ", or set agent.sandbox: auto"}
	case mode == sandbox.ModeAuto && !sb.Active():
		return doctor.Finding{Status: doctor.Warn, Detail: sb.Status(), Fix: fix + ", or accept it with agent.sandbox: off"}
	}
	return doctor.Finding{Status: doctor.OK, Detail: sb.Status()}
}

// configFinding is the failure of a configuration error.
func configFinding(err error, key string) doctor.Finding {
	var ce *config.Error
	if errors.As(err, &ce) {
		return doctor.Finding{Status: doctor.Fail, Detail: ce.Msg, Fix: "fix " + ce.Key}
	}
	return doctor.Finding{Status: doctor.Fail, Detail: err.Error(), Fix: "fix " + key}
}

// mcpChecks starts each MCP server as serve does (newMCP, one manager per
// server so each check has its own deadline) and reports its tools, or
// what it is doing when it has not answered by the check's deadline. The
// servers are stopped under stops, after the finding (a server that does
// not end on its own takes the manager's stop timeout).
func mcpChecks(cfg config.Config, stops *sync.WaitGroup) []doctor.Check {
	names := slices.Sorted(maps.Keys(cfg.MCP.Servers))
	checks := make([]doctor.Check, 0, len(names))
	for _, name := range names {
		srv := cfg.MCP.Servers[name]
		one := cfg
		one.MCP.Servers = map[string]config.MCPServer{name: srv}
		// Counted now, before doctor.Run, which may give up on the check
		// and return while it still runs.
		stops.Add(1)
		checks = append(checks, doctor.Check{Name: "mcp " + name, Run: func(ctx context.Context) doctor.Finding {
			m, err := newMCP(one, slog.New(slog.DiscardHandler))
			if err != nil {
				stops.Done()
				return configFinding(err, "mcp.servers")
			}
			defer func() {
				go func() {
					defer stops.Done()
					_ = m.Close()
				}()
			}()
			return mcpFinding(ctx, m, srv)
		}})
	}
	return checks
}

// mcpFinding starts m's one server and waits for its first connection
// until shortly before ctx's deadline.
func mcpFinding(ctx context.Context, m *mcp.Manager, srv config.MCPServer) doctor.Finding {
	wait := mcpStartTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = time.Until(dl) * 9 / 10 // answer before doctor gives up on the check
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, wait)
	m.Start(wctx)
	cancel()
	s := m.Status()[0]
	switch s.State {
	case mcp.StateReady:
		return doctor.Finding{Status: doctor.OK, Detail: fmt.Sprintf("%d tools (%s)", len(s.Tools), s.Transport)}
	case mcp.StateStarting, mcp.StateIdle:
		return doctor.Finding{Status: doctor.Warn, Detail: mcpState(s, srv, time.Since(start).Round(100*time.Millisecond)),
			Fix: "run `pibot mcp list --wait 2m` to wait for it, or raise --timeout"}
	}
	return doctor.Finding{Status: doctor.Fail, Detail: mcpState(s, srv, 0), Fix: "fix mcp.servers." + s.Name}
}
