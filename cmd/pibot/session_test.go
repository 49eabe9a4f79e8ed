package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// expectedContexts returns NAME.context.jsonl's lines by leaf ("" for the
// default leaf).
func expectedContexts(t *testing.T, name string) map[string]map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorsDir(t), name+".context.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, l := range jsonLines(t, string(data)) {
		leaf, _ := l["leaf"].(string)
		out[leaf] = l
	}
	return out
}

func TestSessionContextMatchesPi(t *testing.T) {
	t.Parallel()
	vectors := []string{
		"agent-tools", "agent-compaction", "agent-retry-abort", "agent-tree", "agent-images-unicode",
		"agent-long-lines", "agent-queue-bash-custom", "sm-labels-custom-info", "sm-roots-summaries",
		"sm-model-thinking", "sm-compaction-edges", "fork-source", "fork-clone", "legacy-v1", "legacy-v2",
		"torn-tail", "wide-tree", "deep-chain",
	}
	dir := t.TempDir()
	for _, name := range vectors {
		t.Run(name, func(t *testing.T) {
			p := copyVector(t, dir, name)
			before, _ := os.ReadFile(p)
			got := jsonLines(t, ok(t, dir, "session", "context", p))
			sameContext(t, name+" default leaf", got[0], expectedContexts(t, name)[""])
			if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
				t.Fatal("session context modified the file")
			}
		})
	}
}

func TestSessionContextLeaf(t *testing.T) {
	dir := t.TempDir()
	p := copyVector(t, dir, "agent-tree")
	want := expectedContexts(t, "agent-tree")
	n := 0
	for leaf, ctx := range want {
		if leaf == "" || n == 5 {
			continue
		}
		n++
		got := jsonLines(t, ok(t, dir, "session", "context", p, "--leaf", leaf))
		sameContext(t, "leaf "+leaf, got[0], ctx)
	}
	r := pibot(t, dir, "", nil, "session", "context", "--leaf", "deadbeef", p)
	if r.code != 1 || !strings.Contains(r.stderr, "deadbeef") || !strings.Contains(r.stderr, p) {
		t.Fatalf("unknown leaf: exit %d %q", r.code, r.stderr)
	}
}

// TestSessionContextStats: --stats says on stderr how the answer was
// built, the fast way for a clean file and the full loader for a legacy
// one, and changes nothing on stdout.
func TestSessionContextStats(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, how string }{
		{"agent-compaction", "stats: fast (envelope index)"},
		{"legacy-v2", "stats: full loader: version 2 file"},
	} {
		p := copyVector(t, dir, tc.name)
		plain := ok(t, dir, "session", "context", p)
		r := pibot(t, dir, "", nil, "session", "context", "--stats", p)
		if r.code != 0 || r.stdout != plain {
			t.Fatalf("%s: --stats: exit %d, stdout changed: %v", tc.name, r.code, r.stdout != plain)
		}
		if !strings.Contains(r.stderr, tc.how) || !strings.Contains(r.stderr, "index ") || !strings.Contains(r.stderr, "validate ") || !strings.Contains(r.stderr, "emit ") {
			t.Fatalf("%s: stderr %q, want %q and the split", tc.name, r.stderr, tc.how)
		}
	}
}

func TestSessionTree(t *testing.T) {
	dir := t.TempDir()
	p := copyVector(t, dir, "agent-tree")
	out := ok(t, dir, "session", "tree", "--all", p)
	data, err := os.ReadFile(filepath.Join(vectorsDir(t), "agent-tree.tree.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := jsonLines(t, string(data))
	for _, l := range lines[1:] {
		if id := l["id"].(string); !strings.Contains(out, id) {
			t.Errorf("tree lacks entry %s", id)
		}
	}
	if got := strings.Count(out, "\n"); got != len(lines)-1 {
		t.Errorf("tree has %d lines, want one per entry (%d)", got, len(lines)-1)
	}
	// By default: one line per user turn.
	turns := ok(t, dir, "session", "tree", p)
	users := strings.Count(readFile(t, p), `"role":"user"`)
	summaries := strings.Count(readFile(t, p), `"type":"branch_summary"`) + strings.Count(readFile(t, p), `"type":"compaction"`)
	if got := strings.Count(turns, "\n"); got != users+summaries || strings.Count(turns, " user: ") != users {
		t.Errorf("default tree has %d lines, want one per user turn (%d) and summary (%d):\n%s", got, users, summaries, turns)
	}
	if !strings.Contains(turns, "◀ leaf") || !strings.Contains(turns, "─ ") {
		t.Errorf("default tree lacks the leaf mark or the branches:\n%s", turns)
	}
}

// TestSessionByID: every session subcommand takes a path, a session id or
// an unambiguous prefix of one, found in the configured data directory.
func TestSessionByID(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	ok(t, dir, "chat", "-c", cfg, "-p", "one")
	ok(t, dir, "chat", "-c", cfg, "-p", "two")
	files := sessionFiles(t, dir)
	if len(files) != 2 {
		t.Fatalf("session files %v", files)
	}
	id := func(p string) string { return jsonLines(t, readFile(t, p))[0]["id"].(string) }
	a, b := id(files[0]), id(files[1])
	common := 0
	for common < len(a) && a[common] == b[common] {
		common++
	}
	for _, arg := range []string{a, a[:common+1], files[0]} {
		out := ok(t, dir, "session", "context", "-c", cfg, arg)
		if got := roles(t, out); len(got) != 2 {
			t.Errorf("context %s: roles %v", arg, got)
		}
		if tree := ok(t, dir, "session", "tree", "-c", cfg, arg); !strings.Contains(tree, " user: ") {
			t.Errorf("tree %s:\n%s", arg, tree)
		}
	}
	if common > 0 {
		r := pibot(t, dir, "", nil, "session", "tree", "-c", cfg, a[:common])
		if r.code == 0 || !strings.Contains(r.stderr, "matches 2 sessions") {
			t.Errorf("ambiguous prefix: exit %d %q", r.code, r.stderr)
		}
	}
	r := pibot(t, dir, "", nil, "session", "export", "-c", cfg, "zzzz")
	if r.code == 0 || !strings.Contains(r.stderr, "no session id starts with it") {
		t.Errorf("unknown id: exit %d %q", r.code, r.stderr)
	}
}

func TestSessionExportFormats(t *testing.T) {
	dir := t.TempDir()
	p := copyVector(t, dir, "agent-tree")
	md := ok(t, dir, "session", "export", "--format", "md", p)
	if !strings.HasPrefix(md, "# ") || !strings.Contains(md, "## You\n") || !strings.Contains(md, "## Assistant\n") {
		t.Errorf("markdown:\n%.400s", md)
	}
	page := ok(t, dir, "session", "export", "--format", "html", p)
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.Contains(page, "class=\"branch\"") || strings.Contains(page, "<script") {
		t.Errorf("html:\n%.400s", page)
	}
	target := filepath.Join(dir, "out.html")
	if r := pibot(t, dir, "", nil, "session", "export", "--format", "html", "-o", target, p); r.code != 0 || readFile(t, target) != page {
		t.Errorf("html to a file: exit %d %q", r.code, r.stderr)
	}
	if r := pibot(t, dir, "", nil, "session", "export", "--format", "pdf", p); r.code != 2 || !strings.Contains(r.stderr, "jsonl, md or html") {
		t.Errorf("unknown format: exit %d %q", r.code, r.stderr)
	}
}

func TestSessionList(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sessions", "nested")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	copyVector(t, filepath.Join(dir, "sessions"), "agent-tools")
	copyVector(t, sub, "fork-source")
	writeFile(t, sub, "notes.jsonl", "not a session\n")
	out := ok(t, dir, "session", "ls", filepath.Join(dir, "sessions"))
	for _, want := range []string{"agent-tools.jsonl", filepath.Join("nested", "fork-source.jsonl"), "Please read hello.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "notes.jsonl") {
		t.Errorf("ls lists a file that is not a session:\n%s", out)
	}
	cfg := writeFile(t, dir, "c.yaml", "data_dir: "+dir+"\n")
	if out2 := ok(t, dir, "session", "ls", "-c", cfg); out2 != out {
		t.Errorf("ls with data_dir differs from ls DIR:\n%s\n%s", out2, out)
	}
}

func TestSessionFork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := copyVector(t, dir, "fork-source")
	want := expectedContexts(t, "fork-source")
	outDir := filepath.Join(dir, "forks")
	for leaf, ctx := range want {
		if leaf == "" {
			continue
		}
		forked := strings.TrimSpace(ok(t, dir, "session", "fork", p, "--at", leaf, "-o", outDir))
		if filepath.Dir(forked) != outDir {
			t.Fatalf("fork written to %s, want in %s", forked, outDir)
		}
		got := jsonLines(t, ok(t, dir, "session", "context", forked))
		sameContext(t, "fork at "+leaf, got[0], ctx)
		header := jsonLines(t, readFile(t, forked))[0]
		if abs, _ := filepath.Abs(p); header["parentSession"] != abs {
			t.Fatalf("fork parentSession = %v, want %s", header["parentSession"], abs)
		}
	}
	if r := pibot(t, dir, "", nil, "session", "fork", p, "--at", "deadbeef"); r.code != 1 || !strings.Contains(r.stderr, "deadbeef") {
		t.Fatalf("fork at unknown entry: exit %d %q", r.code, r.stderr)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSessionExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := copyVector(t, dir, "agent-tree")
	src := jsonLines(t, readFile(t, p))
	for leaf, ctx := range expectedContexts(t, "agent-tree") {
		args := []string{"session", "export", p}
		if leaf != "" {
			args = append(args, "--leaf", leaf)
		}
		out := ok(t, dir, args...)
		lines := jsonLines(t, out)
		if h := lines[0]; h["type"] != "session" || h["id"] != src[0]["id"] || h["timestamp"] == src[0]["timestamp"] || h["parentSession"] != nil {
			t.Fatalf("export header %v (source %v)", h, src[0])
		}
		var parent any
		for i, e := range lines[1:] {
			if e["parentId"] != parent {
				t.Fatalf("leaf %q: entry %d parentId = %v, want %v", leaf, i, e["parentId"], parent)
			}
			parent = e["id"]
		}
		if leaf != "" && parent != leaf {
			t.Fatalf("export ends at %v, want %s", parent, leaf)
		}
		exported := writeFile(t, dir, "export.jsonl", out)
		got := jsonLines(t, ok(t, dir, "session", "context", exported))
		sameContext(t, "export of "+leaf, got[0], ctx)
	}
	target := filepath.Join(dir, "out.jsonl")
	ok(t, dir, "session", "export", p, "-o", target)
	if r := pibot(t, dir, "", nil, "session", "export", p, "-o", target); r.code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("export over an existing file: exit %d %q", r.code, r.stderr)
	}
}

func TestSessionRepair(t *testing.T) {
	dir := t.TempDir()
	p := copyVector(t, dir, "torn-tail")
	before := readFile(t, p)
	r := pibot(t, dir, "", nil, "session", "repair", p, "--dry-run")
	if r.code != 1 || !strings.Contains(r.stdout, "needs repair") || !strings.Contains(r.stderr, p+":") {
		t.Fatalf("dry run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if readFile(t, p) != before {
		t.Fatal("dry run changed the file")
	}
	if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "repaired") {
		t.Fatalf("repair: %q", out)
	}
	if _, err := os.Stat(p + ".broken"); err != nil {
		t.Fatalf("no .broken copy: %v", err)
	}
	if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "nothing to repair") {
		t.Fatalf("second repair: %q", out)
	}
	if out := ok(t, dir, "session", "repair", "--dry-run", p); !strings.Contains(out, "nothing to repair") {
		t.Fatalf("dry run after the repair: %q", out)
	}
	got := jsonLines(t, ok(t, dir, "session", "context", p))
	sameContext(t, "repaired torn-tail", got[0], expectedContexts(t, "torn-tail")[""])
}

// TestSessionRepairSaysNothingToRepair: damage that an earlier repair
// already recorded (bad lines in the middle, re-attached orphans) is not
// "repaired" again; the second run says there is nothing to repair and
// leaves the file alone.
func TestSessionRepairSaysNothingToRepair(t *testing.T) {
	dir := t.TempDir()
	p := copyVector(t, dir, "malformed-lines")
	if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "repaired") || !strings.Contains(out, "repair recorded in entry") {
		t.Fatalf("first repair: %q", out)
	}
	before := readFile(t, p)
	if r := pibot(t, dir, "", nil, "session", "repair", "--dry-run", p); r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") {
		t.Fatalf("dry run after the repair: exit %d, stdout %q", r.code, r.stdout)
	}
	r := pibot(t, dir, "", nil, "session", "repair", p)
	if r.code != 0 || !strings.Contains(r.stdout, "nothing to repair") || strings.Contains(r.stdout, "repaired") {
		t.Fatalf("second repair: exit %d, stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "skipped damaged line") {
		t.Errorf("second repair no longer shows the damage: %q", r.stderr)
	}
	if readFile(t, p) != before {
		t.Fatal("second repair changed the file")
	}
}

// TestSessionParentLoop replays a file on which pi's context walk never
// ends (an entry that is its own parent, after a loop of two): pibot reads
// it without hanging and says so, check reports it damaged, repair cuts
// the loops with a .broken copy, and then the file is clean.
func TestSessionParentLoop(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "loop.jsonl")
	msg := func(id, parent string) string {
		return `{"type":"message","id":"` + id + `","parentId":` + parent + `,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hi ` + id + `"}],"timestamp":1}}` + "\n"
	}
	data := `{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}` + "\n" +
		msg("a1", "null") + msg("b2", `"c3"`) + msg("c3", `"b2"`) + msg("d4", `"d4"`)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r := pibot(t, dir, "", nil, "session", "context", p)
	if r.code != 0 || !strings.Contains(r.stderr, "entry d4: parentId d4 makes a loop") || !strings.Contains(r.stderr, "entry b2: parentId c3 makes a loop") {
		t.Fatalf("context: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if got := roles(t, r.stdout); len(got) != 1 {
		t.Fatalf("context of the self-parented leaf = %v, want its one message", got)
	}
	r = pibot(t, dir, "", nil, "session", "repair", "--dry-run", p)
	if r.code != 1 || !strings.Contains(r.stdout, "needs repair") || readFile(t, p) != data {
		t.Fatalf("dry run: exit %d %q, or the file changed", r.code, r.stdout)
	}
	if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "repaired, original kept as "+p+".broken") {
		t.Fatalf("repair: %q", out)
	}
	if readFile(t, p+".broken") != data {
		t.Fatal(".broken copy is not the original")
	}
	fixed := readFile(t, p)
	if strings.Contains(fixed, `"parentId":"d4"`) || strings.Contains(fixed, `"id":"b2","parentId":"c3"`) {
		t.Fatalf("loops left in the repaired file:\n%s", fixed)
	}
	if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "nothing to repair") {
		t.Fatalf("second repair: %q", out)
	}
}

// TestSessionDamagedMessage: an entry whose message is not an object
// ("message": "x") made every later message of the conversation fail
// while `session repair` said there was nothing to repair. Now every
// reader skips it the same way, naming the line: `session context`
// reports it, `repair --dry-run` says the file needs repair, `repair`
// rewrites the file without it (keeping a copy), and the conversation
// goes on.
func TestSessionDamagedMessage(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`"x"`, `[]`, `null`, `{"role":"assistant","content":7}`} {
		t.Run(bad, func(t *testing.T) {
			dir := t.TempDir()
			cfg := writeFile(t, dir, "pibot.yaml", fauxConfig)
			ok(t, dir, "chat", "-c", cfg, "-p", "first question")
			p := sessionFiles(t, dir)[0]
			ok(t, dir, "chat", "-c", cfg, "--session", p, "-p", "second question")
			lines := strings.Split(strings.TrimSuffix(readFile(t, p), "\n"), "\n")
			n := 0 // the line of the first answer
			for i, l := range lines {
				if strings.Contains(l, `"role":"assistant"`) {
					n = i
					break
				}
			}
			at := strings.Index(lines[n], `"message":`) + len(`"message":`)
			lines[n] = lines[n][:at] + bad + "}"
			damaged := strings.Join(lines, "\n") + "\n"
			if err := os.WriteFile(p, []byte(damaged), 0o600); err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("%s:%d: skipped damaged line: message: ", p, n+1)

			r := pibot(t, dir, "", nil, "session", "context", p)
			if r.code != 0 || !strings.Contains(r.stderr, where) {
				t.Fatalf("context: exit %d, stderr %q, want %q", r.code, r.stderr, where)
			}
			if got := roles(t, r.stdout); !slices.Equal(got, []string{"user", "user", "assistant"}) {
				t.Fatalf("context roles %v", got)
			}
			if r := pibot(t, dir, "", nil, "session", "repair", "--dry-run", p); r.code != 1 || !strings.Contains(r.stdout, "needs repair") {
				t.Fatalf("dry run: exit %d %q %q", r.code, r.stdout, r.stderr)
			}
			if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "repaired, original kept as "+p+".broken") {
				t.Fatalf("repair: %q", out)
			}
			if readFile(t, p+".broken") != damaged {
				t.Fatal("the copy is not the damaged file")
			}
			if out := ok(t, dir, "session", "repair", p); !strings.Contains(out, "nothing to repair") {
				t.Fatalf("second repair: %q", out)
			}
			if out := ok(t, dir, "chat", "-c", cfg, "--session", p, "-p", "third question"); !strings.HasPrefix(out, "You said: third question") {
				t.Fatalf("the conversation after the repair: %q", out)
			}
			if got := roles(t, ok(t, dir, "session", "context", p)); !slices.Equal(got, []string{"user", "user", "assistant", "user", "assistant"}) {
				t.Fatalf("context roles after the repair %v", got)
			}
		})
	}
}

// TestSessionDamagedMessageChat: `pibot chat --session` on a file with a
// damaged entry goes on with the conversation (the writable open repairs
// it, keeping a copy), where it used to fail on every message.
func TestSessionDamagedMessageChat(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "pibot.yaml", fauxConfig)
	ok(t, dir, "chat", "-c", cfg, "-p", "first question")
	p := sessionFiles(t, dir)[0]
	data := readFile(t, p)
	at := strings.LastIndex(data, `"message":{"role":"assistant"`)
	end := strings.LastIndex(data, "\n")
	damaged := data[:at] + `"message":"x"}` + data[end:]
	if err := os.WriteFile(p, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, dir, "chat", "-c", cfg, "--session", p, "-p", "second question"); !strings.Contains(out, "You said: second question") {
		t.Fatalf("answer %q", out)
	}
	if readFile(t, p+".broken") != damaged {
		t.Fatal("no copy of the damaged file")
	}
	if got := roles(t, ok(t, dir, "session", "context", p)); !slices.Equal(got, []string{"user", "user", "assistant"}) {
		t.Fatalf("context roles %v", got)
	}
}

// TestSessionContextPiMigrated: `pibot session context` on files pi
// migrated (a version-1 file's messages get "id" and "parentId" after
// the message) answers every leaf like pi, the fast way. Before, a leaf
// after the last message (pi appends a thinking level change) got no
// messages at all. pi's answers are NAME.context.jsonl, version-1 leaves
// by position (pi's migration gave them new ids).
func TestSessionContextPiMigrated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"legacy-v1", "legacy-v2"} {
		t.Run(name, func(t *testing.T) {
			p := copyVector(t, dir, name+".migrated")
			var ids []string
			for _, e := range jsonLines(t, readFile(t, p))[1:] {
				ids = append(ids, e["id"].(string))
			}
			data, err := os.ReadFile(filepath.Join(vectorsDir(t), name+".context.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range jsonLines(t, string(data)) {
				args := []string{"session", "context", "--stats", p}
				leaf := "default leaf"
				if want["leaf"] != nil {
					leaf = want["leaf"].(string)
					if name == "legacy-v1" {
						leaf = ids[int(want["index"].(float64))]
					}
					args = append(args, "--leaf", leaf)
				}
				r := pibot(t, dir, "", nil, args...)
				if r.code != 0 || !strings.Contains(r.stderr, "stats: fast") {
					t.Fatalf("%s: exit %d, stderr %q", leaf, r.code, r.stderr)
				}
				sameContext(t, name+" "+leaf, jsonLines(t, r.stdout)[0], want)
			}
		})
	}
}
