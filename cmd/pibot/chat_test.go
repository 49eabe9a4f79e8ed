package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pibot/pibot/cluster"
)

const fauxConfig = "data_dir: ./data\nproviders:\n  f:\n    api: faux\n    models: [{id: m}]\nagent:\n  model: f/m\n"

// sessionFiles lists the CLI session files under dir's data directory.
func sessionFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "data", "sessions", "cli", "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// roles returns the roles of a printed context's messages.
func roles(t *testing.T, contextJSON string) []string {
	t.Helper()
	var out []string
	for _, m := range jsonLines(t, contextJSON)[0]["messages"].([]any) {
		out = append(out, m.(map[string]any)["role"].(string))
	}
	return out
}

func TestChatPrint(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	out := ok(t, dir, "chat", "-c", cfg, "-p", "hello pibot")
	if !strings.HasPrefix(out, "You said: hello pibot\n") || !strings.HasSuffix(out, "without an API key.\n") {
		t.Fatalf("answer = %q", out)
	}
	files := sessionFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("session files = %v, want one", files)
	}
	entries := jsonLines(t, readFile(t, files[0]))
	var types []string
	for _, e := range entries[1:] {
		types = append(types, e["type"].(string))
	}
	if want := []string{"model_change", "thinking_level_change", "message", "message"}; !slices.Equal(types, want) {
		t.Fatalf("entry types = %v, want %v", types, want)
	}
	if entries[1]["provider"] != "f" || entries[1]["modelId"] != "m" || entries[1]["parentId"] != nil {
		t.Fatalf("model_change = %v", entries[1])
	}
	ctx := ok(t, dir, "session", "context", files[0])
	if got := roles(t, ctx); !slices.Equal(got, []string{"user", "assistant"}) {
		t.Fatalf("context roles = %v", got)
	}
	if !strings.Contains(ctx, `"text":"hello pibot"`) || !strings.Contains(ctx, "You said: hello pibot") {
		t.Fatalf("context lacks the conversation: %.300s", ctx)
	}

	// --session continues the same file.
	out = ok(t, dir, "chat", "-c", cfg, "--session", files[0], "-p", "second question")
	if !strings.HasPrefix(out, "You said: second question") {
		t.Fatalf("continued answer = %q", out)
	}
	if got := sessionFiles(t, dir); len(got) != 1 {
		t.Fatalf("continuing created another file: %v", got)
	}
	if got := roles(t, ok(t, dir, "session", "context", files[0])); !slices.Equal(got, []string{"user", "assistant", "user", "assistant"}) {
		t.Fatalf("continued context roles = %v", got)
	}
}

func TestChatJSON(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	lines := jsonLines(t, ok(t, dir, "chat", "-c", cfg, "--mode", "json", "one", "two"))
	header := lines[0]
	if header["type"] != "session" || header["version"] != float64(3) {
		t.Fatalf("first line = %v, want the session header", header)
	}
	var types []string
	for _, l := range lines[1:] {
		typ := l["type"].(string)
		if typ == "message_update" && types[len(types)-1] == typ {
			continue // collapse the streamed updates
		}
		if typ == "message_start" || typ == "message_end" {
			typ += ":" + l["message"].(map[string]any)["role"].(string)
		}
		types = append(types, typ)
	}
	run := []string{"agent_start", "turn_start", "message_start:user", "message_end:user", "message_start:assistant",
		"message_update", "message_end:assistant", "turn_end", "agent_end"}
	if want := append(slices.Clone(run), run...); !slices.Equal(types, want) {
		t.Fatalf("event types:\n got %v\nwant %v", types, want)
	}
	files := sessionFiles(t, dir)
	if len(files) != 1 || !strings.Contains(files[0], header["id"].(string)) {
		t.Fatalf("session files %v, want one named after %v", files, header["id"])
	}
	if got := roles(t, ok(t, dir, "session", "context", files[0])); len(got) != 4 {
		t.Fatalf("context roles = %v, want two exchanges", got)
	}
}

func TestChatWithoutModel(t *testing.T) {
	dir := t.TempDir()
	r := pibot(t, dir, "", nil, "chat", "-p", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "OPENAI_API_KEY") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestChatTerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	r := pibot(t, dir, "hello terminal\n", nil, "chat", "-c", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "You said: hello terminal") || !strings.Contains(r.stdout, "without an API key.") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	var files []string
	err := filepath.WalkDir(filepath.Join(dir, "data", "sessions"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) != 1 {
		t.Fatalf("session files %v, %v", files, err)
	}
	if got := roles(t, ok(t, dir, "session", "context", files[0])); !slices.Equal(got, []string{"user", "assistant"}) {
		t.Fatalf("terminal session roles = %v", got)
	}
}

func TestChatSystemPromptFile(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig+"  system_prompt_file: ./missing.md\n")
	r := pibot(t, dir, "", nil, "chat", "-c", cfg, "-p", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "agent.system_prompt_file") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "missing.md"), []byte("Be brief."), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "chat", "-c", cfg, "-p", "hi")
}

// TestChatSessionLockedByServe replays the double write: `pibot chat -p
// --session` on a session of a data directory another process holds (as
// `pibot serve` does) is refused, and the file is left alone; once the
// lock is free the same command works, and accepts the session's id.
func TestChatSessionLockedByServe(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	ok(t, dir, "chat", "-c", cfg, "-p", "first")
	files := sessionFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("files %v", files)
	}
	before := readFile(t, files[0])
	lock, err := cluster.LockDir(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	r := pibot(t, dir, "", nil, "chat", "-c", cfg, "--session", files[0], "-p", "second")
	if r.code != 1 || !strings.Contains(r.stderr, "belongs to the pibot running on data directory") || !strings.Contains(r.stderr, "pid ") {
		t.Fatalf("locked session: exit %d, stderr %q", r.code, r.stderr)
	}
	if readFile(t, files[0]) != before {
		t.Fatal("the refused chat wrote to the session")
	}
	// A session outside the data directory is not serve's.
	outside := filepath.Join(dir, "copy.jsonl")
	if err := os.WriteFile(outside, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	ok(t, dir, "chat", "-c", cfg, "--session", outside, "-p", "elsewhere")
	if err := lock.Unlock(); err != nil {
		t.Fatal(err)
	}
	id := jsonLines(t, before)[0]["id"].(string)
	if out := ok(t, dir, "chat", "-c", cfg, "--session", id[:12], "-p", "second"); !strings.HasPrefix(out, "You said: second") {
		t.Fatalf("after unlock: %q", out)
	}
}
