package main

import (
	"encoding/json"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatAndGatewayRecordAlike runs the same faux script through `pibot
// chat -p` and through the gateway (the terminal chat) and compares the
// session files they write, modulo ids, timestamps, usage and pibot's own
// fields and entries: both record through one session runner.
func TestChatAndGatewayRecordAlike(t *testing.T) {
	const cfg = `data_dir: ./data
agent:
  model: f/m
  thinking: "off"
providers:
  f:
    api: faux
    models: [{id: m}]
    script:
      - thinking: "let me look"
        tool_calls:
          - name: nosuchtool
            args: {path: .}
      - text: done
`
	printDir, termDir := t.TempDir(), t.TempDir()
	writeFile(t, printDir, "c.yaml", cfg)
	writeFile(t, termDir, "c.yaml", cfg)
	if out := ok(t, printDir, "chat", "-c", "c.yaml", "-p", "look around"); strings.TrimSpace(out) != "done" {
		t.Fatalf("print answer %q", out)
	}
	r := pibot(t, termDir, "look around\n", nil, "chat", "-c", "c.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("terminal chat: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	printed := normalized(t, onlySession(t, printDir))
	served := normalized(t, onlySession(t, termDir))
	if printed != served {
		t.Fatalf("pibot chat and the gateway recorded different entries:\nchat:\n%s\ngateway:\n%s", printed, served)
	}
	for _, want := range []string{`"role":"user"`, `"type":"toolCall"`, `"role":"toolResult"`, `"text":"done"`} {
		if !strings.Contains(printed, want) {
			t.Errorf("the sessions lack %s:\n%s", want, printed)
		}
	}
}

// onlySession returns the one session file under dir's data directory.
func onlySession(t *testing.T, dir string) string {
	t.Helper()
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
	return files[0]
}

// normalized is a session file without its header, pibot's custom entries
// (spliced out of the tree) and pibot fields (pibot, fence), with ids replaced by line numbers and timestamps and
// usage masked.
func normalized(t *testing.T, path string) string {
	t.Helper()
	lines := jsonLines(t, readFile(t, path))[1:]
	index := map[any]int{}
	var out []string
	for _, e := range lines {
		if e["type"] == "custom" && strings.HasPrefix(e["customType"].(string), "pibot.") {
			// Its children hang off its parent (pibot.reply sits between
			// a user message and the answer).
			if p, ok := e["parentId"]; ok && p != nil {
				index[e["id"]] = index[p]
			}
			continue
		}
		index[e["id"]] = len(out)
		if p, ok := e["parentId"]; ok && p != nil {
			e["parentId"] = index[p]
		}
		delete(e, "id")
		delete(e, "timestamp")
		delete(e, "pibot")
		delete(e, "fence")
		if m, ok := e["message"].(map[string]any); ok {
			delete(m, "timestamp")
			delete(m, "usage")
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// TestChatSessionKeepsItsModel: `pibot chat --session` goes on with the
// session's model and thinking level, as pi and the gateway do; --model
// switches and records the switch; a model that is gone falls back to the
// configured one.
func TestChatSessionKeepsItsModel(t *testing.T) {
	dir := t.TempDir()
	const providers = "data_dir: ./data\nproviders:\n  f:\n    api: faux\n    models: [{id: m}, {id: n}]\n"
	writeFile(t, dir, "m.yaml", providers+"agent:\n  model: f/m\n")
	writeFile(t, dir, "n.yaml", providers+"agent:\n  model: f/n\n")
	writeFile(t, dir, "gone.yaml", "data_dir: ./data\nproviders:\n  g:\n    api: faux\n    models: [{id: k}]\nagent:\n  model: g/k\n")
	ok(t, dir, "chat", "-c", "m.yaml", "-p", "one")
	files := sessionFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("sessions %v", files)
	}
	steps := []struct {
		args      []string
		wantModel string // of the answer
		changes   int    // model_change entries in the file afterwards
	}{
		{args: []string{"-c", "n.yaml"}, wantModel: "m", changes: 1},
		{args: []string{"-c", "n.yaml", "--model", "f/n"}, wantModel: "n", changes: 2},
		{args: []string{"-c", "m.yaml"}, wantModel: "n", changes: 2},
		{args: []string{"-c", "gone.yaml"}, wantModel: "k", changes: 3},
	}
	for _, s := range steps {
		ok(t, dir, append(append([]string{"chat"}, s.args...), "--session", files[0], "-p", "again")...)
		lines := jsonLines(t, readFile(t, files[0]))
		last := lines[len(lines)-1]["message"].(map[string]any)
		changes := 0
		for _, l := range lines {
			if l["type"] == "model_change" {
				changes++
			}
		}
		if last["model"] != s.wantModel || changes != s.changes {
			t.Fatalf("%v: answered by %v with %d model changes, want %s and %d", s.args, last["model"], changes, s.wantModel, s.changes)
		}
	}
}
