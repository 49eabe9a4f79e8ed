package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

func TestFirstSentence(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Read the contents of a file. Supports images.", "Read the contents of a file."},
		{"No period at all", "No period at all"},
		{"First line\nsecond line.", "First line"},
		{"  Ends here.", "Ends here."},
		{"Version 1.2 is out. Yes.", "Version 1.2 is out."},
	}
	for _, tt := range tests {
		if got := firstSentence(tt.in); got != tt.want {
			t.Errorf("firstSentence(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPromptBuilder(t *testing.T) {
	ws := t.TempDir()
	now := func() time.Time { return time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC) }
	p := promptBuilder{
		workspace: ws,
		tools:     []llm.ToolSpec{{Name: "read", Description: "Read a file. Long text."}, {Name: "bash", Description: "Run a command."}},
		now:       now,
	}
	got, err := p.build()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"You are pibot, an expert coding assistant", "- read: Read a file.\n- bash: Run a command.",
		"Guidelines:", "\n\nCurrent date: 2026-03-04\nCurrent working directory: " + ws} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Long text") || strings.Contains(got, "Project Context") {
		t.Errorf("prompt has unwanted text:\n%s", got)
	}

	project := ""
	p.context = func() string { return project }
	project = "## " + filepath.Join(ws, "AGENTS.md") + "\n\nagent rules\n"
	got, _ = p.build()
	if !strings.Contains(got, "# Project Context\n\nProject-specific instructions and guidelines:\n\n"+project) {
		t.Errorf("project context not included:\n%s", got)
	}
	if i, j := strings.Index(got, "agent rules"), strings.Index(got, "Current date"); i > j {
		t.Errorf("project context must come before the date:\n%s", got)
	}

	custom := filepath.Join(t.TempDir(), "system.md")
	if err := os.WriteFile(custom, []byte("Custom body.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.customFile = custom
	got, _ = p.build()
	if !strings.HasPrefix(got, "Custom body.\n\n# Project Context") || strings.Contains(got, "Available tools") || !strings.Contains(got, "Current date: 2026-03-04") {
		t.Errorf("custom prompt:\n%s", got)
	}
}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args    []string
		wantPos []string
		leaf    string
	}{
		{[]string{"f.jsonl", "--leaf", "abc"}, []string{"f.jsonl"}, "abc"},
		{[]string{"--leaf=abc", "f.jsonl"}, []string{"f.jsonl"}, "abc"},
		{[]string{"a", "b"}, []string{"a", "b"}, ""},
		{nil, nil, ""},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		leaf := fs.String("leaf", "", "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || !slices.Equal(pos, tt.wantPos) || *leaf != tt.leaf {
			t.Errorf("parseArgs(%q) = %q leaf %q, %v", tt.args, pos, *leaf, err)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseArgs(fs, []string{"--nope"}); err == nil {
		t.Error("unknown flag: want error")
	}
}
