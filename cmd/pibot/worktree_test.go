package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/config"
)

// A run in a worktree gets tools working there; a worktree removed and
// made again at the same path (pruned, used again) gets tools over the
// new directory, not the removed one (a confined call, a non-owner's,
// opens files through the directory's handle).
func TestToolboxInWorktree(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir, cfg.Agent.Workspace, cfg.Agent.Sandbox = filepath.Join(dir, "data"), filepath.Join(dir, "ws"), "off"
	wt := filepath.Join(cfg.Agent.Workspace, ".pibot-worktrees", "a")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	tb, err := newToolbox(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.close)
	write := func(content string) {
		t.Helper()
		for _, tool := range tb.forRun(wt, nil, func() bool { return false }) {
			if tool.Spec().Name != "write" {
				continue
			}
			args, _ := json.Marshal(map[string]string{"path": "f.txt", "content": content})
			if out, err := tool.Execute(t.Context(), "c", args, nil); err != nil {
				t.Fatalf("write: %v %+v", err, out)
			}
			return
		}
		t.Fatal("no write tool")
	}
	write("one")
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	write("two")
	if b, err := os.ReadFile(filepath.Join(wt, "f.txt")); err != nil || string(b) != "two" {
		t.Fatalf("f.txt = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Agent.Workspace, "f.txt")); err == nil {
		t.Fatal("the write landed in the workspace")
	}
}
