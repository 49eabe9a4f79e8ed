package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/tools/jail"
)

// minSecretLen keeps short values ("1", "true") from matching secrets.
const minSecretLen = 6

// envSnapshot is the environment as pibot started; commands read it
// through get after the secrets are scrubbed from the process.
type envSnapshot map[string]string

func snapshotEnv() envSnapshot {
	m := envSnapshot{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func (e envSnapshot) get(k string) string { return e[k] }

// configSecrets returns the credentials in cfg: every key tagged as one
// in the schema (config.Secret), the contents of *_file keys included.
func configSecrets(cfg config.Config) []string {
	var out []string
	for _, s := range cfg.Secrets() {
		if s.Value != "" {
			out = append(out, s.Value)
		}
	}
	return out
}

// secretVars names the variables of environ that hold a secret: the
// provider key variables, and every variable whose value is (part of) a
// credential in cfg, however the file referred to it.
func secretVars(cfg config.Config, environ []string) []string {
	secrets := configSecrets(cfg)
	var out []string
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || value == "" {
			continue
		}
		// Read for provider keys when no provider is configured
		// (providers.Defaults).
		hit := name == "OPENAI_API_KEY" || name == "ANTHROPIC_API_KEY"
		// A variable holds a secret when it is one, part of one (a
		// secret assembled from variables) or holds one (a URL carrying a
		// password).
		for _, s := range secrets {
			hit = hit || len(value) >= minSecretLen && strings.Contains(s, value) ||
				len(s) >= minSecretLen && strings.Contains(value, s)
		}
		if hit {
			out = append(out, name)
		}
	}
	return out
}

// scrubSecrets removes the variables holding secrets from pibot's
// environment, including the block /proc/PID/environ shows.
func scrubSecrets(cfg config.Config, log *slog.Logger) {
	names := secretVars(cfg, os.Environ())
	if err := secret.ScrubEnviron(names); err != nil {
		log.Warn("cannot scrub secrets from the process environment", "err", err)
	}
}

// newJail maps agent.limits to the jail every bash call runs in.
func newJail(cfg config.Config, log *slog.Logger) (*jail.Jail, error) {
	return jailFor(cfg, log, true)
}

// jailUser makes newJail's checks (agent.limits.user) without probing
// cgroups (startChecks).
func jailUser(cfg config.Config) error {
	_, err := jailFor(cfg, slog.New(slog.DiscardHandler), false)
	return err
}

func jailFor(cfg config.Config, log *slog.Logger, cgroups bool) (*jail.Jail, error) {
	l := cfg.Agent.Limits
	j, err := jail.New(jail.Config{
		Limits:   jail.Limits{Processes: l.Processes, Memory: int64(l.Memory), CPUTime: l.CPUTime.D(), FileSize: int64(l.FileSize)},
		User:     l.User,
		Logger:   log,
		NoCgroup: !cgroups,
	})
	if err != nil {
		return nil, &config.Error{Key: "agent.limits.user", Msg: err.Error()}
	}
	return j, nil
}
