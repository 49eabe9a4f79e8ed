package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
)

// newSet builds a Set over a fresh workspace holding files.
func newSet(t *testing.T, only bool, files map[string]string) (*Set, string) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(t.Context(), Options{Workspace: dir, WorkspaceOnly: only, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// call runs a tool and returns its text (or error text) and details JSON.
func call(t *testing.T, s *Set, name, args string) (text string, isErr bool, details string) {
	t.Helper()
	return callCtx(t.Context(), t, s, name, args)
}

func callCtx(ctx context.Context, t *testing.T, s *Set, name, args string) (string, bool, string) {
	t.Helper()
	tool := s.Get(name)
	if tool == nil {
		t.Fatalf("no tool %s", name)
	}
	out, err := tool.Execute(ctx, "call-1", json.RawMessage(args), nil)
	if err != nil {
		return err.Error(), true, ""
	}
	var sb strings.Builder
	for _, c := range out.Content {
		if c.Type == llm.ContentText {
			sb.WriteString(c.Text)
		}
	}
	d := ""
	if out.Details != nil {
		b, err := json.Marshal(out.Details)
		if err != nil {
			t.Fatal(err)
		}
		d = string(b)
	}
	return sb.String(), false, d
}

func lines(n int, f func(i int) string) string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, f(i))
	}
	return strings.Join(out, "\n")
}

func TestSpecsArePisSchemas(t *testing.T) {
	s, _ := newSet(t, false, nil)
	want := map[string]string{
		"read":  `{"type":"object","required":["path"],"properties":{"path":{"type":"string","description":"Path to the file to read (relative or absolute)"},"offset":{"type":"number","description":"Line number to start reading from (1-indexed)"},"limit":{"type":"number","description":"Maximum number of lines to read"}}}`,
		"bash":  `{"type":"object","required":["command"],"properties":{"command":{"type":"string","description":"Bash command to execute"},"timeout":{"type":"number","description":"Timeout in seconds (optional, no default timeout)"}}}`,
		"write": `{"type":"object","required":["path","content"],"properties":{"path":{"type":"string","description":"Path to the file to write (relative or absolute)"},"content":{"type":"string","description":"Content to write to the file"}}}`,
	}
	var names []string
	for _, tool := range s.All() {
		sp := tool.Spec()
		names = append(names, sp.Name)
		if !json.Valid(sp.Parameters) || sp.Description == "" {
			t.Errorf("%s: bad spec", sp.Name)
		}
		if w, ok := want[sp.Name]; ok && string(sp.Parameters) != w {
			t.Errorf("%s parameters:\n got %s\nwant %s", sp.Name, sp.Parameters, w)
		}
	}
	if got := strings.Join(names, ","); got != "read,bash,edit,write,grep,find,ls" {
		t.Errorf("tools = %s", got)
	}
	if !strings.Contains(s.Get("bash").Spec().Description, "sandbox off") {
		t.Errorf("bash description lacks sandbox status: %s", s.Get("bash").Spec().Description)
	}
	if _, err := s.Select([]string{"read", "nope"}); err == nil {
		t.Error("Select accepted an unknown tool")
	}
}

func TestRead(t *testing.T) {
	long := strings.Repeat("x", 60*1024)
	files := map[string]string{
		"hello.txt": "line one\nline two\nline three\n",
		"many.txt":  lines(2500, func(i int) string { return "l" + itoa(i) }),
		"wide.txt":  lines(100, func(int) string { return strings.Repeat("y", 1000) }),
		"big.log":   long,
		"mid.txt":   "a\n" + long,
		"png.bin":   "\x89PNG\r\n\x1a\n" + "\x00\x00\x00\x0dIHDR",
	}
	s, dir := newSet(t, false, files)
	cases := []struct {
		name, args, want, details string
		isErr                     bool
	}{
		{"plain", `{"path":"hello.txt"}`, "line one\nline two\nline three\n", "", false},
		{"at prefix", `{"path":"@hello.txt"}`, "line one\nline two\nline three\n", "", false},
		{"offset beyond", `{"path":"hello.txt","offset":9}`, "Offset 9 is beyond end of file (4 lines total)", "", true},
		{"limit remaining", `{"path":"hello.txt","offset":2,"limit":1}`, "line two\n\n[2 more lines in file. Use offset=3 to continue.]", "", false},
		{"lines truncated", `{"path":"many.txt"}`, lines(2000, func(i int) string { return "l" + itoa(i) }) + "\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]", `"truncatedBy":"lines"`, false},
		{"bytes truncated", `{"path":"wide.txt"}`, lines(51, func(int) string { return strings.Repeat("y", 1000) }) + "\n\n[Showing lines 1-51 of 100 (50.0KB limit). Use offset=52 to continue.]", `"truncatedBy":"bytes"`, false},
		{"first line too long", `{"path":"big.log"}`, "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' big.log | head -c 51200]", `{"truncation":{"content":"","truncated":true,"truncatedBy":"bytes","totalLines":1,"totalBytes":61440,"outputLines":0,"outputBytes":0,"lastLinePartial":false,"firstLineExceedsLimit":true,"maxLines":2000,"maxBytes":51200}}`, false},
		{"offset line too long", `{"path":"mid.txt","offset":2}`, "[Line 2 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '2p' mid.txt | head -c 51200]", "", false},
		{"missing", `{"path":"nope/missing.go"}`, "ENOENT: no such file or directory, access '" + filepath.Join(dir, "nope/missing.go") + "'", "", true},
		{"image", `{"path":"png.bin"}`, "Read image file [image/png]", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, isErr, det := call(t, s, "read", c.args)
			if got != c.want || isErr != c.isErr {
				t.Errorf("got (%v) %q\nwant (%v) %q", isErr, trim(got), c.isErr, trim(c.want))
			}
			if !strings.Contains(det, c.details) || (c.details == "" && det != "" && !strings.Contains(c.name, "line")) {
				t.Errorf("details = %s, want %s", trim(det), c.details)
			}
		})
	}
}

func trim(s string) string {
	if len(s) > 300 {
		return s[:150] + " ... " + s[len(s)-150:]
	}
	return s
}

func TestWriteReportsUTF16Length(t *testing.T) {
	s, dir := newSet(t, false, nil)
	got, isErr, _ := call(t, s, "write", `{"path":"sub/dir/CHANGELOG.md","content":"# Changelog\n\n- hello.txt: `+"`line two` -> `line 2`"+`\n"}`)
	if isErr || got != "Successfully wrote 49 bytes to sub/dir/CHANGELOG.md" {
		t.Errorf("got %q", got)
	}
	got, _, _ = call(t, s, "write", `{"path":"e.txt","content":"😀é"}`)
	if got != "Successfully wrote 3 bytes to e.txt" {
		t.Errorf("got %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "e.txt")); string(b) != "😀é" {
		t.Errorf("file = %q", b)
	}
}

func TestWorkspaceOnly(t *testing.T) {
	s, dir := newSet(t, true, map[string]string{"in.txt": "ok\n"})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "file-link")); err != nil {
		t.Fatal(err)
	}
	refused := []struct{ tool, args, path string }{
		{"read", `{"path":"../x"}`, "../x"},
		{"read", `{"path":"link/secret.txt"}`, "link/secret.txt"},
		{"read", `{"path":"file-link"}`, "file-link"},
		{"read", `{"path":"/etc/passwd"}`, "/etc/passwd"},
		{"write", `{"path":"link/new.txt","content":"x"}`, "link/new.txt"},
		{"edit", `{"path":"../y","edits":[{"oldText":"a","newText":"b"}]}`, "../y"},
		{"ls", `{"path":"link"}`, "link"},
		{"grep", `{"pattern":"x","path":".."}`, ".."},
		{"find", `{"pattern":"*","path":"~/../"}`, "~/../"},
	}
	for _, c := range refused {
		got, isErr, _ := call(t, s, c.tool, c.args)
		want := "Path " + c.path + " is outside the workspace. Only files inside the workspace can be accessed (agent.workspace_only is enabled)."
		if !isErr || got != want {
			t.Errorf("%s %s: got %q", c.tool, c.args, got)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("write escaped the workspace through a symlink")
	}
	if got, isErr, _ := call(t, s, "read", `{"path":"in.txt"}`); isErr || got != "ok\n" {
		t.Errorf("inside read: %q", got)
	}
}

func writeFile(p, s string) error { return os.WriteFile(p, []byte(s), 0o644) }
