package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/doctor"
	"github.com/pibot/pibot/providers"
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
	findings = append(findings, doctor.Run(ctx, doctorChecks(cfg, c.getenv), *timeout)...)
	if fails, _ := doctor.Report(c.stdout, findings); fails > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// doctorChecks turns a valid configuration into the checks of its parts.
func doctorChecks(cfg config.Config, getenv func(string) string) []doctor.Check {
	var checks []doctor.Check
	if cfg.TelegramEnabled() {
		tg := cfg.Adapter.Telegram
		tok, err := config.ReadSecret("adapters.telegram.token", tg.Token, tg.TokenFile)
		checks = append(checks, credCheck(doctor.Telegram, err, doctor.Cred{Name: "telegram", URL: tg.APIURL, Token: tok, Key: "adapters.telegram.token", URLKey: "adapters.telegram.api_url"}))
	}
	if s := cfg.Adapter.Slack; s.BotToken != "" {
		checks = append(checks, doctor.Slack(doctor.Cred{Name: "slack", URL: s.APIURL, Token: s.BotToken, Key: "adapters.slack.bot_token", URLKey: "adapters.slack.api_url"}))
	}
	if d := cfg.Adapter.Discord; d.Token != "" {
		checks = append(checks, doctor.Discord(doctor.Cred{Name: "discord", URL: d.APIURL, Token: d.Token, Key: "adapters.discord.token", URLKey: "adapters.discord.api_url"}))
	}
	checks = append(checks, providerChecks(cfg, getenv)...)
	checks = append(checks, doctor.Check{Name: "model", Run: func(context.Context) doctor.Finding { return modelFinding(cfg, getenv) }})
	checks = append(checks, doctor.Check{Name: "http", Run: func(context.Context) doctor.Finding { return httpFinding(cfg) }})
	if cfg.Cluster.RedisURL != "" {
		checks = append(checks, doctor.Redis("redis", cfg.Cluster.RedisURL, "cluster.redis_url"))
	}
	checks = append(checks, doctor.DataDir("data_dir", cfg.DataDir, "data_dir", doctor.MinFree))
	checks = append(checks,
		doctor.Check{Name: "workspace", Run: func(ctx context.Context) doctor.Finding { return workspaceFinding(ctx, cfg) }},
		doctor.Check{Name: "sandbox", Run: func(ctx context.Context) doctor.Finding { return sandboxFinding(ctx, cfg) }})
	return checks
}

// credCheck is check(cred), or a failing check when the credential could
// not be read (a missing *_file).
func credCheck(check func(doctor.Cred) doctor.Check, readErr error, cred doctor.Cred) doctor.Check {
	if readErr != nil {
		return doctor.Check{Name: cred.Name, Run: func(context.Context) doctor.Finding {
			return doctor.Finding{Status: doctor.Fail, Detail: readErr.Error(), Fix: "make the file readable by the user pibot runs as"}
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
		cred := doctor.Cred{Name: "provider " + p.Name, URL: p.BaseURL, Token: p.APIKey.Reveal(), Key: key, URLKey: urlKey, Headers: p.Headers}
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
		tok, err := config.ReadSecret("adapters.web.token", cfg.Adapter.Web.Token, cfg.Adapter.Web.TokenFile)
		if err == nil {
			err = strongToken("adapters.web.token", tok, cfg.HTTP.Listen, " (or set adapters.web.enabled: false)")
		}
		if err != nil {
			return configFinding(err, "adapters.web.token")
		}
	}
	tok, err := config.ReadSecret("http.metrics_token", cfg.HTTP.MetricsToken, cfg.HTTP.MetricsTokenFile)
	if err == nil && tok != "" {
		err = strongToken("http.metrics_token", tok, cfg.HTTP.Listen, "")
	}
	if err != nil {
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
	if shared := sharedFileSystem(ws, cfg.DataDir, cfg.Agent.Limits.DiskReserve); shared != "" && f.Status == doctor.OK {
		f.Status, f.Detail = doctor.Warn, f.Detail+"; "+shared
		f.Fix = "put agent.workspace on a file system of its own (a partition, a volume, a loop device), or keep agent.limits.disk_reserve"
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
