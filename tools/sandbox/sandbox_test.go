package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestArgs checks the layout's shape: no mount of the host root, system
// directories read-only, private directories before the workspace, masks
// after it, namespaces last.
func TestArgs(t *testing.T) {
	ws := t.TempDir()
	data := filepath.Join(ws, "pibot-data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(ws, "pibot.yaml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := Args(Layout{Workspace: ws, Deny: []string{data, cfg, filepath.Join(ws, "missing")}})
	got := strings.Join(args, " ")
	for _, bad := range []string{"--ro-bind / /", "--bind / /", "/root", "/run", "--share-net"} {
		if strings.Contains(got, bad) {
			t.Errorf("args contain %q: %s", bad, got)
		}
	}
	pos := func(s string) int {
		i := strings.Index(got, s)
		if i < 0 {
			t.Fatalf("args lack %q: %s", s, got)
		}
		return i
	}
	pos("--ro-bind /usr /usr")
	pos("--ro-bind /etc /etc")
	if pos("--tmpfs /tmp") > pos("--bind "+ws+" "+ws) || pos("--tmpfs "+HomeDir) > pos("--bind "+ws) {
		t.Errorf("private directories must be mounted before the workspace: %s", got)
	}
	if pos("--tmpfs "+data) < pos("--bind "+ws) || pos("--ro-bind /dev/null "+cfg) < pos("--bind "+ws) {
		t.Errorf("masks must come after the workspace: %s", got)
	}
	if strings.Contains(got, "missing") {
		t.Errorf("a path that does not exist is masked: %s", got)
	}
	if !strings.HasSuffix(got, "--unshare-all --die-with-parent --new-session") {
		t.Errorf("args end %s", got)
	}
	if !strings.Contains(strings.Join(Args(Layout{Workspace: ws, AllowNet: true}), " "), "--unshare-all --share-net") {
		t.Error("network not shared back when allowed")
	}
}

// TestMasks checks where denied paths are hidden: at their real path
// inside a mounted directory, at their place below the workspace mount
// when the workspace is reached through a symlink, nowhere when the
// sandbox does not show them, and once when nested.
func TestMasks(t *testing.T) {
	root := t.TempDir()
	mk := func(p string, dir bool) string {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		var err error
		if dir {
			err = os.Mkdir(p, 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	etc := mk("etc", true)
	conf := mk("etc/pibot/pibot.yaml", false)
	wsReal := mk("real-ws", true)
	data := mk("real-ws/data", true)
	inData := mk("real-ws/data/pairing.json", false)
	elsewhere := mk("home/secret", false)
	link := filepath.Join(root, "conf-link")
	if err := os.Symlink(conf, link); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.Symlink(wsReal, ws); err != nil {
		t.Fatal(err)
	}
	got := masks([]string{link, inData, data, elsewhere, filepath.Join(etc, "*.none")}, []string{etc}, ws, wsReal)
	want := []string{"--ro-bind", os.DevNull, conf, "--tmpfs", filepath.Join(ws, "data")}
	if !slices.Equal(got, want) {
		t.Errorf("masks = %q, want %q", got, want)
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
			s, err := NewWithProbe(t.Context(), c.mode, nil, c.bin, c.probe)
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

// Start returns before the probe of mode auto is over (a server listens
// meanwhile); whatever depends on the outcome waits for it, and decided
// hears of it once. Mode bwrap is still decided, and fails, in Start.
func TestStartProbesAutoInTheBackground(t *testing.T) {
	bin := fakeBwrap(t)
	release, probing := make(chan struct{}), make(chan struct{})
	probe := func(context.Context, string) error {
		close(probing)
		<-release
		return nil
	}
	calls := make(chan *Sandbox, 2)
	started := make(chan *Sandbox, 1)
	go func() {
		s, err := StartWithProbe(t.Context(), ModeAuto, []string{"/data"}, bin, probe, func(s *Sandbox) { calls <- s })
		if err != nil {
			t.Error(err)
		}
		started <- s
	}()
	var s *Sandbox
	select {
	case s = <-started:
	case <-time.After(time.Minute):
		t.Fatal("Start waited for the probe")
	}
	<-probing
	select {
	case <-s.decided:
		t.Fatal("readers let in before the probe was over")
	case <-calls:
		t.Fatal("decided before the probe was over")
	default:
	}
	status := make(chan string, 1)
	go func() { status <- s.Status() }() // waits for the probe
	close(release)
	if got := <-status; !strings.Contains(got, "sandbox on") {
		t.Errorf("status = %q", got)
	}
	if got := <-calls; got != s || !s.Active() {
		t.Errorf("decided with %p (want %p), active %v", got, s, s.Active())
	}
	if argv := s.Wrap([]string{"ls"}, "/ws", "/ws", false); argv[0] != bin {
		t.Errorf("argv = %v", argv)
	}
	if len(calls) != 0 {
		t.Error("decided called twice")
	}

	blocked := func(context.Context, string) error { return errors.New("no user namespaces") }
	if _, err := StartWithProbe(t.Context(), ModeBwrap, nil, bin, blocked, nil); err == nil {
		t.Error("mode bwrap with a blocked bwrap started")
	}
}

// TestMounts checks the further mounts: after the private directories,
// each after the mounts (and the workspace) that contain it, whatever
// order they were given in, a denied path inside one masked, and Sees
// deciding by the innermost.
func TestMounts(t *testing.T) {
	root := t.TempDir()
	ws, repo := filepath.Join(root, "ws"), filepath.Join(root, "repo")
	secret := filepath.Join(repo, "objects", "secret")
	for _, d := range []string{ws, secret, filepath.Join(repo, "objects", "pack")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dotGit := filepath.Join(ws, ".git")
	if err := os.WriteFile(dotGit, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := Layout{Workspace: ws, Deny: []string{secret}, Mounts: []Mount{
		{Path: filepath.Join(repo, "objects", "pack")},
		{Path: dotGit},
		{Path: filepath.Join(repo, "objects"), Write: true},
		{Path: repo},
		{Path: "relative/ignored", Write: true},
	}}
	got := strings.Join(Args(l), " ")
	order := []string{
		"--ro-bind " + repo + " " + repo,
		"--bind " + repo + "/objects " + repo + "/objects",
		"--ro-bind " + repo + "/objects/pack " + repo + "/objects/pack",
		"--tmpfs " + secret,
	}
	last := -1
	for _, o := range order {
		i := strings.Index(got, o)
		if i <= last {
			t.Fatalf("%q missing or out of order in: %s", o, got)
		}
		last = i
	}
	if i, j := strings.Index(got, "--ro-bind "+dotGit+" "+dotGit), strings.Index(got, "--bind "+ws+" "+ws); j < 0 || i < j || j < strings.Index(got, "--tmpfs /tmp") {
		t.Fatalf("the workspace's read-only file is not mounted after the workspace: %s", got)
	}
	if strings.Contains(got, "relative") {
		t.Fatalf("a relative mount is in: %s", got)
	}
	// A mount that contains the workspace comes before it: the workspace
	// stays writable, as Sees says.
	around := Layout{Workspace: ws, Mounts: []Mount{{Path: root}}}
	got = strings.Join(Args(around), " ")
	if i, j := strings.Index(got, "--ro-bind "+root+" "+root), strings.Index(got, "--bind "+ws+" "+ws); i < 0 || j < i {
		t.Fatalf("a mount around the workspace is not mounted before it: %s", got)
	}
	if a := around.Sees(filepath.Join(ws, "file")); a != ReadWrite {
		t.Fatalf("Sees of the workspace inside a read-only mount = %v", a)
	}
	for p, want := range map[string]Access{
		filepath.Join(repo, "config"):                ReadOnly,
		filepath.Join(repo, "objects", "ab", "cd"):   ReadWrite,
		filepath.Join(repo, "objects", "pack", "p"):  ReadOnly,
		filepath.Join(secret, "x"):                   Hidden,
		dotGit:                                       ReadOnly,
		filepath.Join(ws, "file"):                    ReadWrite,
		filepath.Join(root, "elsewhere"):             Private, // under /tmp
		filepath.Join(repo+"-other", "objects", "x"): Private,
	} {
		if !strings.HasPrefix(root, "/tmp/") && want == Private {
			continue
		}
		if got := l.Sees(p); got != want {
			t.Errorf("Sees(%s) = %v, want %v", p, got, want)
		}
	}
}
