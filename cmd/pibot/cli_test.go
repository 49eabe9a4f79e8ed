package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/gateway/access"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestVersion(t *testing.T) {
	out := ok(t, t.TempDir(), "version")
	for _, want := range []string{"pibot v0.0.0-test\n", "commit: 0123456789abcdef0123456789abcdef01234567\n",
		"date:   2026-12-01T12:00:00Z\n", "go:     " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(out, want) {
			t.Errorf("version output %q lacks %q", out, want)
		}
	}
	if out := ok(t, t.TempDir(), "version", "--short"); out != "v0.0.0-test\n" {
		t.Errorf("version --short = %q", out)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args     []string
		code     int
		inStderr string
	}{
		{nil, 2, "Usage:"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"session", "tree"}, 2, "want SESSION"},
		{[]string{"session", "fork", "x.jsonl"}, 2, "--at ID is required"},
		{[]string{"chat", "--mode", "xml", "hi"}, 2, "--mode must be text or json"},
		{[]string{"pairing", "approve", "telegram"}, 2, "PLATFORM CODE"},
		{[]string{"session", "context", "missing.jsonl"}, 1, "missing.jsonl"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			r := pibot(t, t.TempDir(), "", nil, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.inStderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tt.code, tt.inStderr)
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "data_dir: ./d\nagent:\n  model: f/m\nproviders:\n  f: {api: faux}\n")
	unknown := writeFile(t, dir, "unknown.yaml", "agent:\n  modle: x/y\n")
	invalid := writeFile(t, dir, "invalid.yaml", "agent:\n  queue: {mode: shout}\naccess:\n  dm_policy: everyone\n")
	badModel := writeFile(t, dir, "model.yaml", "agent:\n  model: f/nope\n  fallbacks: [g/m]\nproviders:\n  f: {api: openai-completions, base_url: 'http://127.0.0.1:1/v1', models: [{id: m}]}\n")
	thinking := writeFile(t, dir, "thinking.yaml", "agent:\n  model: f/m\n  thinking: high\nproviders:\n  f: {api: openai-completions, base_url: 'http://127.0.0.1:1/v1', models: [{id: m}]}\n")
	tests := []struct {
		name     string
		args     []string
		env      []string
		code     int
		want     []string // in stdout (code 0) or stderr
		wantNone string
	}{
		{"good", []string{"config", "check", "-c", good}, nil, 0, []string{"good.yaml: ok"}, ""},
		{"good positional", []string{"config", "check", good}, nil, 0, []string{"ok"}, ""},
		{"env default", []string{"config", "check"}, []string{"PIBOT_CONFIG=" + good}, 0, []string{"good.yaml: ok"}, ""},
		{"defaults", []string{"config", "check"}, nil, 0, []string{"default configuration: ok"}, ""},
		{"unknown key", []string{"config", "check", "-c", unknown}, nil, 1, []string{"agent.modle", "unknown key"}, ""},
		{"every bad key", []string{"config", "check", "-c", invalid}, nil, 1, []string{"agent.queue.mode", "access.dm_policy"}, "ok"},
		{"missing file", []string{"config", "check", "-c", filepath.Join(dir, "nope.yaml")}, nil, 1, []string{"nope.yaml"}, ""},
		{"did you mean", []string{"config", "check", "-c", unknown}, nil, 1, []string{"did you mean agent.model?"}, ""},
		{"unknown model", []string{"config", "check", "-c", badModel}, nil, 1, []string{"agent.model:", "f/nope", "agent.fallbacks[0]:", `provider "g" is not configured`}, "ok"},
		{"thinking warning", []string{"config", "check", "-c", thinking}, nil, 0, []string{"ok"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := pibot(t, dir, "", tt.env, tt.args...)
			out := r.stdout
			if tt.code != 0 {
				out = r.stderr
			}
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout %s\nstderr %s", r.code, tt.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q lacks %q", out, w)
				}
			}
			if tt.wantNone != "" && strings.Contains(r.stdout, tt.wantNone) {
				t.Errorf("stdout %q contains %q", r.stdout, tt.wantNone)
			}
		})
	}
}

// TestConfigCheckThinkingWarning: a thinking level the model cannot do is
// a warning, not an error.
func TestConfigCheckThinkingWarning(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "agent:\n  model: f/m\n  thinking: high\nproviders:\n  f: {api: openai-completions, base_url: 'http://127.0.0.1:1/v1', models: [{id: m}]}\n")
	r := pibot(t, dir, "", nil, "config", "check", "-c", cfg)
	if r.code != 0 || !strings.Contains(r.stderr, `warning: agent.thinking: f/m cannot think at level "high"`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestConfigExampleRoundTrips(t *testing.T) {
	dir := t.TempDir()
	out := ok(t, dir, "config", "example")
	if out != config.Example {
		t.Fatal("config example differs from config.Example")
	}
	p := writeFile(t, dir, "example.yaml", out)
	env := []string{"TELEGRAM_BOT_TOKEN=1:x", "OPENAI_API_KEY=k", "ANTHROPIC_API_KEY=k", "SLACK_BOT_TOKEN=x", "DISCORD_BOT_TOKEN=x"}
	r := pibot(t, dir, "", env, "config", "check", "-c", p)
	if r.code != 0 {
		t.Fatalf("example does not check: %s%s", r.stdout, r.stderr)
	}
}

func TestModels(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "providers:\n  f:\n    api: faux\n    models: [{id: m}]\n  remote:\n    api: openai-completions\n    base_url: https://example.invalid/v1\n    models: [{id: big}]\nagent:\n  model: f/m\n")
	out := ok(t, dir, "models", "-c", cfg)
	lines := strings.Split(out, "\n")
	find := func(ref string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, ref+" ") {
				return l
			}
		}
		t.Fatalf("models output lacks %s:\n%s", ref, out)
		return ""
	}
	if l := find("f/m"); !strings.Contains(l, " ok ") || !strings.HasSuffix(strings.TrimSpace(l), "*") {
		t.Errorf("f/m line %q: want credentials ok and default mark", l)
	}
	if l := find("remote/big"); !strings.Contains(l, "missing") {
		t.Errorf("remote/big line %q: want credentials missing", l)
	}
	out = ok(t, dir, "models")
	if !strings.Contains(out, "No models configured") || !strings.Contains(out, "OPENAI_API_KEY") {
		t.Errorf("models without config: %q", out)
	}
}

func TestPairing(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./data\n")
	store, err := access.OpenStore(filepath.Join(dir, "data", "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, created, err := store.RequestCode(t.Context(), "telegram", "42", "Ann")
	if err != nil || !created {
		t.Fatalf("RequestCode = %v, %v", created, err)
	}
	out := ok(t, dir, "pairing", "list", "-c", cfg)
	if !strings.Contains(out, "pending") || !strings.Contains(out, code) {
		t.Fatalf("list before approve: %q", out)
	}
	if r := pibot(t, dir, "", nil, "pairing", "approve", "telegram", "WRONGCODE", "-c", cfg); r.code != 1 || !strings.Contains(r.stderr, "unknown or expired") {
		t.Fatalf("approve wrong code: exit %d %q", r.code, r.stderr)
	}
	out = ok(t, dir, "pairing", "approve", "telegram", strings.ToLower(code), "-c", cfg)
	if !strings.Contains(out, "approved telegram:42 (Ann)") {
		t.Fatalf("approve: %q", out)
	}
	if ok, err := store.Approved(t.Context(), "telegram", "42"); err != nil || !ok {
		t.Fatal("store does not see the approval")
	}
	out = ok(t, dir, "pairing", "list", "-c", cfg)
	if !strings.Contains(out, "approved") || strings.Contains(out, code) {
		t.Fatalf("list after approve: %q", out)
	}
	ok(t, dir, "pairing", "revoke", "telegram", "42", "-c", cfg)
	if ok, err := store.Approved(t.Context(), "telegram", "42"); err != nil || ok {
		t.Fatal("still approved after revoke")
	}
	if r := pibot(t, dir, "", nil, "pairing", "revoke", "telegram", "42", "-c", cfg); r.code != 1 || !strings.Contains(r.stderr, "not paired") {
		t.Fatalf("second revoke: exit %d %q", r.code, r.stderr)
	}
}

// TestPairingOffline: `pibot pairing` works on the data directory of the
// configuration without the platform tokens that only serve needs, and
// refuses to start an empty data directory where pibot's is not.
func TestPairingOffline(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./data\nadapters:\n  telegram:\n    token: ${TG_TOKEN}\n")
	r := pibot(t, dir, "", nil, "pairing", "list", "-c", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "no data directory at ./data (data_dir of "+cfg+")") {
		t.Fatalf("missing data dir: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Fatal("pairing list created a data directory")
	}
	store, err := access.OpenStore(filepath.Join(dir, "data", "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := store.RequestCode(t.Context(), "telegram", "42", "Ann")
	if err != nil {
		t.Fatal(err)
	}
	if out := ok(t, dir, "pairing", "approve", "-c", cfg, "telegram", code); !strings.Contains(out, "approved telegram:42") {
		t.Fatalf("approve without the token: %q", out)
	}
	// serve still needs the token.
	if r := pibot(t, dir, "", nil, "config", "check", "-c", cfg); r.code == 0 || !strings.Contains(r.stderr, "TG_TOKEN") {
		t.Fatalf("config check without the token: exit %d %q", r.code, r.stderr)
	}
	if r := pibot(t, dir, "", nil, "pairing", "list"); r.code != 1 || !strings.Contains(r.stderr, "sudo -u pibot pibot … -c /etc/pibot/config.yaml") {
		t.Fatalf("without a configuration: exit %d %q", r.code, r.stderr)
	}
	bad := writeFile(t, dir, "bad.yaml", "data_dir: ${STATE}/data\n")
	if r := pibot(t, dir, "", nil, "pairing", "list", "-c", bad); r.code != 1 || !strings.Contains(r.stderr, "data_dir: ${STATE}") {
		t.Fatalf("data_dir from an unset variable: exit %d %q", r.code, r.stderr)
	}
}

// TestPairingAsAnotherUser: run as root on the data directory of a
// service that runs as another user (deploy/systemd: user pibot),
// `pibot pairing approve` would write a pairing store the service cannot
// read. It refuses, naming the owner and the command to run instead;
// list, which writes nothing, answers with the same note.
func TestPairingAsAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give the data directory to another user")
	}
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "data_dir: ./data\n")
	store, err := access.OpenStore(filepath.Join(dir, "data", "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := store.RequestCode(t.Context(), "telegram", "42", "Ann")
	if err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	for _, p := range []string{filepath.Join(dir, "data"), filepath.Join(dir, "data", "pairing.json")} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	r := pibot(t, dir, "", nil, "pairing", "approve", "telegram", code, "-c", cfg)
	want := "sudo -u "
	if r.code != 1 || !strings.Contains(r.stderr, "belongs to") || !strings.Contains(r.stderr, "runs as root") ||
		!strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "pibot pairing approve telegram "+code+" -c "+cfg) {
		t.Fatalf("approve as root: exit %d %q", r.code, r.stderr)
	}
	st, err := os.Stat(filepath.Join(dir, "data", "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != nobody {
		t.Errorf("pairing.json now belongs to uid %d", uid)
	}
	if ok, _ := store.Approved(t.Context(), "telegram", "42"); ok {
		t.Error("approved anyway")
	}
	r = pibot(t, dir, "", nil, "pairing", "list", "-c", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, code) || !strings.Contains(r.stderr, "note: the data directory") {
		t.Errorf("list as root: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
}
