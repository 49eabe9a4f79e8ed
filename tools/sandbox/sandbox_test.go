package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestArgs(t *testing.T) {
	got := strings.Join(Args("/ws", false), " ")
	want := "--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind /ws /ws --unshare-all --die-with-parent --new-session"
	if got != want {
		t.Errorf("args = %s", got)
	}
	if !strings.Contains(strings.Join(Args("/ws", true), " "), "--unshare-all --share-net") {
		t.Error("network not shared back when allowed")
	}
}

func fakeBwrap(t *testing.T) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "bwrap")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestModes(t *testing.T) {
	ok := func(context.Context, string) error { return nil }
	blocked := func(context.Context, string) error { return errors.New("setting up uid map: Permission denied") }
	bin := fakeBwrap(t)
	cases := []struct {
		name    string
		mode    Mode
		bin     string
		probe   Probe
		active  bool
		wantErr bool
		status  string
	}{
		{"off", ModeOff, bin, ok, false, false, "sandbox off"},
		{"auto works", ModeAuto, bin, ok, true, false, "sandbox on (bubblewrap)"},
		{"auto missing", ModeAuto, "/nonexistent/bwrap", ok, false, false, "sandbox unavailable: bwrap is not installed; bash commands run UNSANDBOXED"},
		{"auto blocked", ModeAuto, bin, blocked, false, false, "unprivileged user namespaces may be disabled"},
		{"bwrap missing fails closed", ModeBwrap, "/nonexistent/bwrap", ok, false, true, ""},
		{"bwrap blocked fails closed", ModeBwrap, bin, blocked, false, true, ""},
		{"bwrap works", ModeBwrap, bin, ok, true, false, "sandbox on"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewWithProbe(t.Context(), c.mode, c.bin, c.probe)
			if c.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Active() != c.active || !strings.Contains(s.Status(), c.status) {
				t.Errorf("active=%v status=%q", s.Active(), s.Status())
			}
			argv := s.Wrap([]string{"/bin/bash", "-c", "ls"}, "/ws", "/ws", false)
			if c.active != (argv[0] == bin) || argv[len(argv)-1] != "ls" {
				t.Errorf("argv = %v", argv)
			}
		})
	}
	if _, err := ParseMode("docker"); err == nil {
		t.Error("ParseMode accepted docker")
	}
}
