package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "pibot.yaml")
	if err := os.WriteFile(secret, []byte("token: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The confined set decides what the tools themselves call inside.
	confined, dir := newSet(t, true, map[string]string{"notes.txt": "hello\n", "sub/a.go": "package a\n"})
	if err := os.Symlink(secret, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	ws, err := NewWorkspace(dir, home, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tool, args string
		want       string // "" for no path
		inside     bool
		write      bool
		wantErr    bool
	}{
		{"read", `{"path":"notes.txt"}`, filepath.Join(dir, "notes.txt"), true, false, false},
		{"read", `{"path":"@notes.txt"}`, filepath.Join(dir, "notes.txt"), true, false, false},
		{"read", `{"path":"` + secret + `"}`, secret, false, false, false},
		{"read", `{"path":"sub/../../` + filepath.Base(dir) + `/notes.txt"}`, filepath.Join(dir, "notes.txt"), true, false, false},
		{"read", `{"path":"../x"}`, filepath.Join(filepath.Dir(dir), "x"), false, false, false},
		{"read", `{"path":"link.yaml"}`, filepath.Join(dir, "link.yaml"), false, false, false},
		{"read", `{"path":"~/.ssh/id_rsa"}`, filepath.Join(home, ".ssh/id_rsa"), false, false, false},
		{"write", `{"path":"new.txt","content":"x"}`, filepath.Join(dir, "new.txt"), true, true, false},
		{"write", `{"path":"/etc/cron.d/x","content":"x"}`, "/etc/cron.d/x", false, true, false},
		{"edit", `{"path":"notes.txt","edits":[{"oldText":"a","newText":"b"}]}`, filepath.Join(dir, "notes.txt"), true, true, false},
		{"edit", `{"path":"/etc/hosts","oldText":"a","newText":"b"}`, "/etc/hosts", false, true, false},
		{"grep", `{"pattern":"x"}`, dir, true, false, false},
		{"grep", `{"pattern":"token","path":"` + outside + `"}`, outside, false, false, false},
		{"find", `{"pattern":"*.go","path":""}`, dir, true, false, false},
		{"ls", `{"path":"/"}`, "/", false, false, false},
		{"attach", `{"path":"` + secret + `"}`, secret, false, false, false},
		{"bash", `{"command":"cat /etc/passwd"}`, "", false, false, false},
		{"unknown", `{"path":"/etc"}`, "", false, false, false},
		{"read", `{}`, "", false, false, true},
		{"read", `not json`, "", false, false, true},
		{"edit", `{"path":"notes.txt"}`, "", false, false, true},
	}
	for _, tt := range tests {
		got, err := ws.Paths(tt.tool, []byte(tt.args))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s %s: err = %v, want error %v", tt.tool, tt.args, err, tt.wantErr)
			continue
		}
		if tt.want == "" {
			if len(got) != 0 {
				t.Errorf("%s %s: paths %+v, want none", tt.tool, tt.args, got)
			}
			continue
		}
		if len(got) != 1 || got[0] != (Touch{Path: tt.want, Inside: tt.inside, Write: tt.write}) {
			t.Errorf("%s %s: paths %+v, want %s inside=%v write=%v", tt.tool, tt.args, got, tt.want, tt.inside, tt.write)
		}
	}
	// Paths agrees with the tools: a confined read of what Paths calls
	// outside is refused, of what it calls inside is not.
	for _, p := range []string{"notes.txt", "link.yaml", secret} {
		touches, err := ws.Paths("read", []byte(`{"path":"`+p+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		text, isErr, _ := call(t, confined, "read", `{"path":"`+p+`"}`)
		if refused := isErr && strings.Contains(text, "outside the workspace"); refused == touches[0].Inside {
			t.Errorf("read %s: Paths says inside=%v, the confined tool answered %q", p, touches[0].Inside, text)
		}
	}
}
