package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/config"
	"github.com/pibot/pibot/tools/sandbox"
)

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareWorkspace checks the start-up refusal of layouts that give
// tools pibot's own files, with symlinks resolved, and that safe layouts
// pass with every protected path denied.
func TestPrepareWorkspace(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	data := filepath.Join(dir, "pibot-data")
	mkdirs(t, ws, data, filepath.Join(dir, "other"))
	symlink(t, dir, filepath.Join(dir, "other", "dir-link"))
	mkdirs(t, filepath.Join(ws, "d"))
	symlink(t, filepath.Join(ws, "d"), filepath.Join(dir, "other", "data-link"))
	symlink(t, "../ws/not-yet", filepath.Join(dir, "other", "dangling-data"))
	tests := []struct {
		name string
		edit func(c *config.Config)
		want []string // in the error; none means no error
	}{
		{"own directories", func(c *config.Config) {}, nil},
		{"old default layout", func(c *config.Config) { c.Agent.Workspace = dir },
			[]string{"agent.workspace", "contains data_dir (" + data + ")", "contains the configuration file " + filepath.Join(dir, "pibot.yaml"), "default ./pibot-workspace"}},
		{"workspace inside data_dir", func(c *config.Config) {
			c.Agent.Workspace = filepath.Join(data, "sessions")
			mkdirs(t, c.Agent.Workspace)
		},
			[]string{"agent.workspace", "lies inside data_dir (" + data + ")"}},
		{"workspace is data_dir", func(c *config.Config) { c.Agent.Workspace = data }, []string{"agent.workspace", "contains data_dir"}},
		{"workspace through a symlink", func(c *config.Config) { c.Agent.Workspace = filepath.Join(dir, "other", "dir-link") },
			[]string{"agent.workspace", "data_dir"}},
		{"data_dir through a symlink", func(c *config.Config) { c.DataDir = filepath.Join(dir, "other", "data-link") },
			[]string{"agent.workspace", "contains data_dir"}},
		{"data_dir a dangling symlink into the workspace", func(c *config.Config) { c.DataDir = filepath.Join(dir, "other", "dangling-data") },
			[]string{"agent.workspace", "contains data_dir"}},
		{"data_dir not created yet, inside", func(c *config.Config) { c.DataDir = filepath.Join(ws, "new", "data") },
			[]string{"contains data_dir"}},
		{"secret file inside", func(c *config.Config) {
			c.Adapter.Telegram.TokenFile = filepath.Join(ws, "tg.token")
			c.Providers = map[string]config.Provider{"openai": {APIKeyFile: filepath.Join(ws, "key")}}
		}, []string{"adapters.telegram.token_file", "providers.openai.api_key_file"}},
		{"cluster secret file inside", func(c *config.Config) { c.Cluster.SecretFile = filepath.Join(ws, "cluster.secret") },
			[]string{"cluster.secret_file"}},
		{"configured workspace missing", func(c *config.Config) { c.Agent.Workspace = filepath.Join(dir, "nope") },
			[]string{"agent.workspace", "create the directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Agent.Workspace = ws
			cfg.DataDir = data
			cfg.File = filepath.Join(dir, "pibot.yaml")
			tt.edit(&cfg)
			got, deny, err := prepareWorkspace(cfg)
			if len(tt.want) == 0 {
				if err != nil || got != ws || len(deny) != 2 || deny[0] != data || deny[1] != cfg.File {
					t.Fatalf("got %q %q %v", got, deny, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: workspace %s", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestDefaultWorkspaceCreated checks that with no configuration the
// workspace is ./pibot-workspace, created private, beside ./pibot-data.
func TestDefaultWorkspaceCreated(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	ws, deny, err := prepareWorkspace(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "pibot-workspace"))
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 || ws != filepath.Join(dir, "pibot-workspace") {
		t.Fatalf("workspace %s: %v %v", ws, st, err)
	}
	if len(deny) != 1 || deny[0] != filepath.Join(dir, "pibot-data") {
		t.Errorf("deny = %q", deny)
	}
}

// TestStartRefusesWorkspaceWithPibotFiles replays the default layout of
// old (workspace ".", data in ./pibot-data, configuration ./pibot.yaml
// beside it) through the real binary: chat and serve refuse to start and
// name the keys.
func TestStartRefusesWorkspaceWithPibotFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "pibot.yaml", "data_dir: ./pibot-data\nagent:\n  workspace: .\n  model: f/m\nproviders:\n  f:\n    api: faux\n    models: [{id: m}]\n")
	for _, args := range [][]string{
		{"chat", "-c", "pibot.yaml", "-p", "hi"},
		{"serve", "-c", "pibot.yaml", "--listen", "127.0.0.1:0"},
	} {
		r := pibot(t, dir, "", nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "agent.workspace") || !strings.Contains(r.stderr, "contains data_dir") ||
			!strings.Contains(r.stderr, "configuration file") || strings.Contains(r.stdout, "You said") {
			t.Errorf("%s: exit %d\nstdout %q\nstderr %q", args[0], r.code, r.stdout, r.stderr)
		}
	}
}

// TestToolsNeverReachPibotFiles replays "the agent can change who is
// allowed" through the real binary with the new default layout: a model
// whose tool calls read and rewrite ../pibot-data/pairing.json and
// ../pibot.yaml, directly and through a symlink in the workspace, gets
// errors, and nothing leaks into the session or changes on disk. With a
// working bubblewrap, sandboxed bash cannot read them either.
func TestToolsNeverReachPibotFiles(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "pibot-workspace")
	mkdirs(t, ws, filepath.Join(dir, "pibot-data"))
	pairing := writeFile(t, filepath.Join(dir, "pibot-data"), "pairing.json", `{"approved":["XYZZY-PAIRING"]}`)
	symlink(t, "../pibot-data/pairing.json", filepath.Join(ws, "link.json"))
	sandboxMode, bashCall := "off", ""
	if _, err := sandbox.New(t.Context(), sandbox.ModeBwrap, nil); err == nil {
		sandboxMode = "bwrap"
		bashCall = `
          - name: bash
            args: {command: "cat ../pibot.yaml ../pibot-data/pairing.json; ls -A ../pibot-data; echo written > ../pibot.yaml"}`
	} else {
		t.Logf("bash is not replayed: no working bubblewrap: %v", err)
	}
	yaml := `data_dir: ./pibot-data
agent:
  model: f/m
  sandbox: ` + sandboxMode + `
providers:
  f:
    api: faux
    models: [{id: m}]
    # XYZZY-CONFIG
    script:
      - tool_calls:
          - name: read
            args: {path: ../pibot-data/pairing.json}
          - name: read
            args: {path: link.json}
          - name: grep
            args: {pattern: "XY[Z]ZY", path: ..}
          - name: ls
            args: {path: ../pibot-data}
          - name: write
            args: {path: ../pibot.yaml, content: "access: {dm_policy: open}"}
          - name: edit
            args: {path: link.json, edits: [{oldText: approved, newText: attacker}]}` + bashCall + `
      - text: done
`
	cfg := writeFile(t, dir, "pibot.yaml", yaml)
	out := ok(t, dir, "chat", "-c", "pibot.yaml", "-p", "take over")
	if strings.TrimSpace(out) != "done" {
		t.Errorf("answer %q", out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "pibot-data", "sessions", "cli", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("sessions %v", files)
	}
	sess := readFile(t, files[0])
	if strings.Contains(sess, "XYZZY") {
		t.Errorf("a secret reached the session:\n%s", sess)
	}
	if n := strings.Count(sess, "pibot's own data"); n != 5 {
		t.Errorf("%d refusals in the session, want 5 (read, read via link, ls, write, edit):\n%s", n, sess)
	}
	if b, _ := os.ReadFile(cfg); string(b) != yaml {
		t.Errorf("pibot.yaml changed: %q", b)
	}
	if b, _ := os.ReadFile(pairing); string(b) != `{"approved":["XYZZY-PAIRING"]}` {
		t.Errorf("pairing.json changed: %q", b)
	}
	if _, err := exec.LookPath("bwrap"); err == nil && sandboxMode == "off" {
		t.Log("bwrap is installed but cannot create a sandbox here")
	}
}
