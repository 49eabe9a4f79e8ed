package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/config"
)

// TestBashCannotReadPibotSecrets replays issue #10 through the real
// binary: an unsandboxed bash call hunts for pibot's secrets in
// /proc/PID/environ and /proc/PID/mem of every process (its parent
// first). pibot scrubbed them from its environment block, is not
// dumpable, and runs the call without CAP_SYS_PTRACE: nothing leaks.
// (The attack's own text never spells the secrets' common part.)
func TestBashCannotReadPibotSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const (
		configKey  = "sk-SECRET-config-4f1c2a9b"
		defaultKey = "sk-SECRET-openai-77d0e3aa"
	)
	attack := `cat /proc/$PPID/environ; tr '\0' '\n' </proc/$PPID/environ; head -c 100 /proc/$PPID/mem; ` +
		`for p in /proc/[0-9]*; do tr '\0' '\n' <$p/environ; grep -a -o 'sk-S[E]CRET[-a-z0-9]*' $p/mem; done 2>/dev/null | grep -a 'S[E]CRET'; echo ATTACK-DONE`
	yaml := `data_dir: ./data
agent:
  model: f/m
  sandbox: "off"
providers:
  f:
    api: faux
    api_key: ${PIBOT_TEST_FAUX_KEY}
    models: [{id: m}]
    script:
      - tool_calls:
          - name: bash
            args: {command: "` + strings.ReplaceAll(strings.ReplaceAll(attack, `\`, `\\`), `"`, `\"`) + `"}
      - text: done
`
	writeFile(t, dir, "c.yaml", yaml)
	r := pibot(t, dir, "", []string{"PIBOT_TEST_FAUX_KEY=" + configKey, "OPENAI_API_KEY=" + defaultKey},
		"chat", "--mode", "json", "-c", "c.yaml", "steal the keys")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "ATTACK-DONE") {
		t.Fatalf("the bash call did not run: %.2000s", r.stdout)
	}
	var sess string
	files, _ := filepath.Glob(filepath.Join(dir, "data", "sessions", "cli", "*.jsonl"))
	for _, f := range files {
		sess += readFile(t, f)
	}
	for _, out := range []string{r.stdout, r.stderr, sess} {
		if strings.Contains(out, "SECRET") {
			t.Errorf("a secret leaked to the tool: %.3000s", out)
		}
	}
}

func TestSecretVars(t *testing.T) {
	var cfg config.Config
	cfg.Adapter.Telegram.Token = "123456:tg-token-value"
	cfg.Providers = map[string]config.Provider{"p": {APIKey: "sk-provider", Headers: map[string]string{"Authorization": "Bearer hdr-secret-1"}}}
	env := []string{"TG=123456:tg-token-value", "KEY=sk-provider", "HDR=hdr-secret-1", "OPENAI_API_KEY=x",
		"ANTHROPIC_API_KEY=y", "HOME=/root", "SHORT=1", "EMPTY=", "OTHER=unrelated-value"}
	// Cluster mode (issue 30): the Redis password, however the URL was
	// assembled, and the cluster secret.
	cfg.Cluster.RedisURL = "redis://:redis-pw-4711@redis:6379/0"
	cfg.Cluster.Secret = "cluster-secret-0123456789abcdef0123"
	env = append(env, "PIBOT_REDIS_PASSWORD=redis-pw-4711", "PIBOT_REDIS_URL=redis://:redis-pw-4711@redis:6379/0",
		"PIBOT_CLUSTER_SECRET=cluster-secret-0123456789abcdef0123")
	got := secretVars(cfg, env)
	want := []string{"TG", "KEY", "HDR", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PIBOT_REDIS_PASSWORD", "PIBOT_REDIS_URL", "PIBOT_CLUSTER_SECRET"}
	if !slices.Equal(got, want) {
		t.Errorf("secretVars = %v, want %v", got, want)
	}
}
