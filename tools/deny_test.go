package tools

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/tools/toolstest"
)

// denyLayout lays out pibot's default files in a fresh directory: the
// workspace (ws, either the directory itself as in the old default "."
// or "pibot-workspace"), data in ./pibot-data and the configuration in
// ./pibot.yaml, all holding secrets.
func denyLayout(t *testing.T, wsName string) (dir, ws, data, cfg string) {
	t.Helper()
	dir = t.TempDir()
	ws = filepath.Join(dir, wsName)
	data = filepath.Join(dir, "pibot-data")
	cfg = filepath.Join(dir, "pibot.yaml")
	for p, content := range map[string]string{
		filepath.Join(ws, "notes.txt"):         "workspace notes",
		filepath.Join(data, "pairing.json"):    `{"SECRET":"pairing"}`,
		filepath.Join(data, "sessions", "a.j"): "SECRET session",
		cfg:                                    "token: SECRET-token",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, ws, data, cfg
}

// TestFileToolsRefuseDeniedPaths replays "the agent can change who is
// allowed": with the data directory and the configuration beside the
// workspace, unconfined file tools read and rewrote pairing.json and
// pibot.yaml. Every file tool refuses them, in every mode, by relative
// path, absolute path, through a symlink and through a symlinked
// directory, and the files stay as they were.
func TestFileToolsRefuseDeniedPaths(t *testing.T) {
	for _, only := range []bool{false, true} {
		t.Run(map[bool]string{false: "unconfined", true: "confined"}[only], func(t *testing.T) {
			dir, ws, data, cfg := denyLayout(t, "pibot-workspace")
			pairing := filepath.Join(data, "pairing.json")
			for link, target := range map[string]string{"pairing-link": pairing, "data-link": data, "cfg-link": cfg, "dangling": filepath.Join(data, "new.json")} {
				if err := os.Symlink(target, filepath.Join(ws, link)); err != nil {
					t.Fatal(err)
				}
			}
			fake := &toolstest.Attacher{}
			s, err := New(t.Context(), Options{Workspace: ws, WorkspaceOnly: only, DenyPaths: []string{data, cfg}, Attacher: fake, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			paths := []string{"../pibot-data/pairing.json", pairing, "../pibot.yaml", cfg, "pairing-link", "data-link/pairing.json", "cfg-link", "../pibot-data", "data-link"}
			q := func(p string) string { b, _ := json.Marshal(p); return string(b) }
			for _, p := range paths {
				calls := map[string]string{
					"read":   `{"path":` + q(p) + `}`,
					"write":  `{"path":` + q(p) + `,"content":"owned"}`,
					"edit":   `{"path":` + q(p) + `,"edits":[{"oldText":"SECRET","newText":"owned"}]}`,
					"ls":     `{"path":` + q(p) + `}`,
					"grep":   `{"pattern":"SECRET","path":` + q(p) + `}`,
					"find":   `{"pattern":"*","path":` + q(p) + `}`,
					"attach": `{"path":` + q(p) + `}`,
				}
				for tool, args := range calls {
					got, isErr, _ := call(t, s, tool, args)
					if !isErr || !strings.Contains(got, "pibot's own data") {
						t.Errorf("%s %s: isErr=%v %q", tool, p, isErr, got)
					}
				}
			}
			for _, p := range []string{"dangling", "../pibot-data/new.json"} {
				if got, isErr, _ := call(t, s, "write", `{"path":`+q(p)+`,"content":"x"}`); !isErr || !strings.Contains(got, "pibot's own data") {
					t.Errorf("write %s: %q", p, got)
				}
			}
			if _, err := os.Stat(filepath.Join(data, "new.json")); err == nil {
				t.Error("write created a file in the data directory")
			}
			if b, _ := os.ReadFile(pairing); string(b) != `{"SECRET":"pairing"}` {
				t.Errorf("pairing.json changed: %q", b)
			}
			if b, _ := os.ReadFile(cfg); string(b) != "token: SECRET-token" {
				t.Errorf("pibot.yaml changed: %q", b)
			}
			if len(fake.Files()) != 0 {
				t.Errorf("attached %d files", len(fake.Files()))
			}
			// The workspace itself still works.
			if got, isErr, _ := call(t, s, "read", `{"path":"notes.txt"}`); isErr || got != "workspace notes" {
				t.Errorf("read notes.txt: %q", got)
			}
			if !only {
				// Walking the parent skips the data directory and the
				// configuration.
				if got, _, _ := call(t, s, "grep", `{"pattern":"SECRET","path":`+q(dir)+`}`); strings.Contains(got, "SECRET") {
					t.Errorf("grep over the parent: %q", got)
				}
				got, _, _ := call(t, s, "find", `{"pattern":"*","path":`+q(dir)+`}`)
				if strings.Contains(got, "pairing.json") || strings.Contains(got, "sessions") || strings.Contains(got, "pibot.yaml") || !strings.Contains(got, "notes.txt") {
					t.Errorf("find over the parent: %q", got)
				}
			}
		})
	}
}

// TestFileToolsDenyInsideWorkspace covers the old default layout
// (workspace ".", which contains the data directory and the
// configuration): start-up now refuses it, and the file tools refuse the
// denied paths inside the workspace anyway; grep and find skip them.
func TestFileToolsDenyInsideWorkspace(t *testing.T) {
	_, ws, data, cfg := denyLayout(t, ".")
	s, err := New(t.Context(), Options{Workspace: ws, WorkspaceOnly: true, DenyPaths: []string{data, cfg}, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for tool, args := range map[string]string{
		"read":  `{"path":"pibot-data/pairing.json"}`,
		"write": `{"path":"pibot.yaml","content":"access: {dm_policy: open}"}`,
		"edit":  `{"path":"./pibot-data/pairing.json","edits":[{"oldText":"pairing","newText":"x"}]}`,
		"ls":    `{"path":"pibot-data/sessions"}`,
	} {
		if got, isErr, _ := call(t, s, tool, args); !isErr || !strings.Contains(got, "pibot's own data") {
			t.Errorf("%s: %q", tool, got)
		}
	}
	if got, _, _ := call(t, s, "grep", `{"pattern":"SECRET"}`); got != "No matches found" {
		t.Errorf("grep: %q", got)
	}
	if got, _, _ := call(t, s, "find", `{"pattern":"*"}`); got != "notes.txt" {
		t.Errorf("find: %q", got)
	}
}

// TestOpenedFileChecked covers a symlink swapped in after Resolve checked
// the path: the file opened is checked again by the path the kernel
// resolved, before anything is read or truncated.
func TestOpenedFileChecked(t *testing.T) {
	_, ws, data, cfg := denyLayout(t, "pibot-workspace")
	w, err := NewWorkspace(ws, "", false, data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	swapped := filepath.Join(ws, "swapped")
	if err := os.Symlink(cfg, swapped); err != nil {
		t.Fatal(err)
	}
	// Resolve refuses; the open-time check is what is tested here, as if
	// the link had appeared after Resolve.
	if _, err := w.Resolve("swapped"); err == nil {
		t.Fatal("Resolve accepted the link")
	}
	if _, err := w.call().readFile(swapped, "swapped"); err == nil || !strings.Contains(err.Error(), "pibot's own data") {
		t.Errorf("readFile: %v", err)
	}
	if err := w.call().writeFile(swapped, "swapped", []byte("owned"), 0o644); err == nil || !strings.Contains(err.Error(), "pibot's own data") {
		t.Errorf("writeFile: %v", err)
	}
	f, err := os.Open(swapped)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.call().verify(f, swapped, "swapped", false); err == nil {
		t.Error("checkOpened accepted the configuration")
	}
	if b, _ := os.ReadFile(cfg); string(b) != "token: SECRET-token" {
		t.Errorf("configuration changed: %q", b)
	}
	// Ordinary files still read and write.
	p := filepath.Join(ws, "notes.txt")
	if err := w.call().writeFile(p, "notes.txt", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := w.call().readFile(p, "notes.txt"); err != nil || string(b) != "new" {
		t.Errorf("read back %q %v", b, err)
	}
}
