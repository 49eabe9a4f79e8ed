package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/config"
)

// startChecks makes every refusal of `pibot serve` that depends only on
// the configuration and the file system, and returns them all (joined;
// each names its key). serve makes them before it opens anything, and
// `pibot config check` makes the same ones: what one refuses the other
// refuses, in the same words. The checks are the very functions serve
// starts with (the providers' and adapters' constructors, the token rules, the workspace
// layout, the cron parser, the jail's user, MCP and hooks), called here
// without side effects: nothing is created, nothing is started, nothing
// is dialled. What needs the network (Redis, the platforms, the
// providers) is for `pibot doctor`.
func startChecks(ctx context.Context, c *cli, cfg config.Config) error {
	quiet := slog.New(slog.DiscardHandler)
	var errs []error
	add := func(err error) {
		var joined interface{ Unwrap() []error }
		switch {
		case errors.As(err, &joined):
			errs = append(errs, joined.Unwrap()...) // one line each
		case err != nil:
			errs = append(errs, err)
		}
	}
	add(listenSet(cfg))
	add(shadowedBindings(cfg))
	// The providers read their key files when they are built.
	_, err := newRegistry(cfg, c.getenv, quiet, 0)
	add(err)
	add(clusterWebhookSecret(cfg))
	// The adapters check their settings and tokens when they are built;
	// they start nothing before Run.
	_, err = serveCmd{c}.adapters(cfg, quiet, http.NewServeMux(), cluster.NewRates(), nil)
	add(err)
	_, err = metricsHandler(cfg, http.NotFoundHandler())
	add(err)
	add(dataDirUsable(cfg))
	ws, _, err := checkWorkspace(cfg, false)
	add(err)
	add(systemPromptReadable(cfg))
	_, err = scheduleSpecs(cfg)
	add(err)
	add(jailUser(cfg))
	if m, err := newMCP(cfg, quiet); err != nil {
		add(err)
	} else {
		_ = m.Close()
	}
	if ws != "" {
		_, err = newExtensions(cfg, ws, quiet)
		add(err)
		_, err = worktrees(ctx, cfg, config.DefaultAgent, ws, nil, quiet)
		add(err)
	}
	// Each further agent's workspace, prompt file and extensions, under
	// its own keys.
	for _, name := range cfg.AgentNames()[1:] {
		view := agentView(cfg, name)
		ws, _, err := checkWorkspace(view, false)
		add(agentKeys(name, err))
		add(agentKeys(name, systemPromptReadable(view)))
		if ws != "" {
			_, err = newExtensions(view, ws, quiet)
			add(agentKeys(name, err))
			_, err = worktrees(ctx, view, name, ws, nil, quiet)
			add(err)
		}
	}
	return errors.Join(errs...)
}

// listenSet refuses an empty http.listen (serve's --listen fills it).
func listenSet(cfg config.Config) error {
	if cfg.HTTP.Listen == "" {
		return &config.Error{Key: "http.listen", Msg: "must be set for serve (host:port)"}
	}
	return nil
}

// clusterWebhookSecret: in cluster mode a Telegram webhook needs its
// secret, from which every replica derives the same webhook path.
func clusterWebhookSecret(cfg config.Config) error {
	tg := cfg.Adapter.Telegram
	if cfg.Cluster.RedisURL != "" && cfg.Adapter.Telegram.Enabled() && tg.Mode == "webhook" && tg.WebhookSecret == "" && tg.WebhookSecretFile == "" {
		return &config.Error{Key: "adapters.telegram.webhook_secret", Msg: "must be set in cluster mode (every replica serves the webhook path derived from it)"}
	}
	return nil
}

// dataDirUsable refuses a data_dir that is, or lies under, something
// other than a directory (serve creates a missing one).
func dataDirUsable(cfg config.Config) error {
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return &config.Error{Key: "data_dir", Msg: err.Error()}
	}
	for p := abs; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist) && p != filepath.Dir(p):
			continue // created at start
		case err != nil:
			return &config.Error{Key: "data_dir", Msg: fmt.Sprintf("%s: %v", abs, unwrapPathError(err))}
		case st.IsDir():
			return nil
		case p == abs:
			return &config.Error{Key: "data_dir", Msg: abs + " is a file, not a directory"}
		default:
			return &config.Error{Key: "data_dir", Msg: fmt.Sprintf("%s cannot be created: %s is a file, not a directory", abs, p)}
		}
	}
}

// systemPromptReadable refuses an agent.system_prompt_file that cannot be
// read: every run would fall back to the default prompt.
func systemPromptReadable(cfg config.Config) error {
	f := cfg.Agent.SystemPromptFile
	if f == "" {
		return nil
	}
	st, err := os.Stat(f)
	switch {
	case err != nil:
		return &config.Error{Key: "agent.system_prompt_file", Msg: fmt.Sprintf("%s: %v", f, unwrapPathError(err))}
	case st.IsDir():
		return &config.Error{Key: "agent.system_prompt_file", Msg: f + " is a directory, not a file"}
	}
	file, err := os.Open(f)
	if err != nil {
		return &config.Error{Key: "agent.system_prompt_file", Msg: fmt.Sprintf("%s: %v", f, unwrapPathError(err))}
	}
	return file.Close()
}
