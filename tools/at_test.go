package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A set At a directory of the workspace (a worktree) treats it as its
// workspace: relative paths, confinement, bash's working directory.
func TestAtWorksInTheDirectory(t *testing.T) {
	s, ws := newSet(t, true, map[string]string{"main.txt": "main\n", "wt/a/file.txt": "in wt\n"})
	at, err := s.At(filepath.Join(ws, "wt", "a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, isErr, _ := call(t, at, "write", `{"path":"new.txt","content":"x"}`); isErr {
		t.Fatal("write refused")
	}
	if _, err := os.Stat(filepath.Join(ws, "wt", "a", "new.txt")); err != nil {
		t.Fatalf("write did not land in the directory: %v", err)
	}
	if text, _, _ := call(t, at, "read", `{"path":"file.txt"}`); !strings.Contains(text, "in wt") {
		t.Fatalf("read file.txt: %q", text)
	}
	// Confined to the directory: the rest of the workspace is outside.
	for _, p := range []string{"../../main.txt", filepath.Join(ws, "main.txt")} {
		if text, isErr, _ := call(t, at, "read", `{"path":"`+p+`"}`); !isErr {
			t.Errorf("read %s from the directory: %q", p, text)
		}
	}
	text, isErr, _ := call(t, at, "bash", `{"command":"pwd; echo $HOME"}`)
	want := filepath.Join(ws, "wt", "a")
	if isErr || strings.Count(text, want) != 2 {
		t.Fatalf("bash in %s: %q", want, text)
	}
	// Only directories inside the workspace.
	for _, d := range []string{ws, t.TempDir(), filepath.Join(ws, "nope")} {
		if _, err := s.At(d, nil); err == nil {
			t.Errorf("At(%s) succeeded", d)
		}
	}
}
