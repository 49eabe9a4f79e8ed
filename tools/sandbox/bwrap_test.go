package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// realSandbox returns a sandbox on the real bwrap, or skips the test when
// bubblewrap is missing or cannot create a sandbox on this host.
func realSandbox(t *testing.T, deny ...string) *Sandbox {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bubblewrap is not installed (apt-get install bubblewrap): the real sandbox is not tested")
	}
	s, err := New(t.Context(), ModeBwrap, deny)
	if err != nil {
		t.Skipf("bubblewrap cannot create a sandbox on this host, the real sandbox is not tested: %v", err)
	}
	return s
}

// hostDir makes a directory in a host directory that the sandbox of old
// (the host root mounted read-only) showed: /var/tmp, which is not a
// tmpfs in the sandbox of old, unlike /tmp.
func hostDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "pibot-sandbox-test-")
	if err != nil {
		t.Skipf("cannot create a directory in /var/tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type runResult struct {
	out  string
	code int
}

// run runs script with bash in s, workspace ws.
func run(t *testing.T, s *Sandbox, ws string, allowNet bool, script string) runResult {
	t.Helper()
	argv := s.Wrap([]string{"/bin/bash", "-c", script}, ws, ws, allowNet)
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + ws, "LANG=C.UTF-8"}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", argv, err)
	}
	return runResult{string(out), code}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRealSandboxHidesHost replays "sandboxed bash reads the host": with
// the host root mounted read-only, bash read ~/.ssh, the configuration
// with its secrets and pibot's data directory. Through the real bwrap,
// none of it is readable; the workspace is writable, /tmp and the home
// directory are private, the system directories read-only.
func TestRealSandboxHidesHost(t *testing.T) {
	host := hostDir(t)
	ws := filepath.Join(host, "pibot-workspace")
	data := filepath.Join(host, "pibot-data")
	cfg := filepath.Join(host, "pibot.yaml")
	sshKey := filepath.Join(host, "home", ".ssh", "id_x")
	other := filepath.Join(host, "other", "notes.txt")
	writeFile(t, filepath.Join(ws, "hello.txt"), "hello")
	writeFile(t, filepath.Join(data, "pairing.json"), "PAIRING-SECRET")
	writeFile(t, cfg, "token: CONFIG-SECRET")
	writeFile(t, sshKey, "SSH-SECRET")
	writeFile(t, other, "OTHER-SECRET")
	// A file the workspace must not expose although it lies inside it
	// (start-up refuses such a layout; the sandbox hides it anyway).
	inWS := filepath.Join(ws, "token.txt")
	writeFile(t, inWS, "TOKEN-SECRET")
	hostTmp, err := os.MkdirTemp("", "pibot-host-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(hostTmp)
	writeFile(t, filepath.Join(hostTmp, "x"), "TMP-SECRET")

	s := realSandbox(t, data, cfg, inWS)
	for _, allowNet := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_network=%v", allowNet), func(t *testing.T) {
			for _, p := range []string{sshKey, cfg, filepath.Join(data, "pairing.json"), other, inWS, filepath.Join(hostTmp, "x")} {
				r := run(t, s, ws, allowNet, "cat "+p)
				if r.code == 0 || strings.Contains(r.out, "SECRET") {
					t.Errorf("cat %s: exit %d, output %q", p, r.code, r.out)
				}
			}
			for _, d := range []string{data, filepath.Dir(sshKey), host + "/other", "/root", "/home", "/run", "/var/run", "/var/lib", "/srv", "/mnt"} {
				r := run(t, s, ws, allowNet, "ls -A "+d)
				if r.code == 0 && strings.TrimSpace(r.out) != "" && d != "/home" {
					t.Errorf("ls %s shows %q", d, r.out)
				}
			}
			if r := run(t, s, ws, allowNet, "ls -A /home"); strings.TrimSpace(r.out) != filepath.Base(HomeDir) {
				t.Errorf("ls /home = %q, want only the private home", r.out)
			}
			r := run(t, s, ws, allowNet, `cat hello.txt && echo made > made.txt && echo tmp > /tmp/t && cat /tmp/t && ls -A /tmp && echo "home=$HOME" && touch ~/h && ls ~ && ! touch /usr/x 2>/dev/null && ! touch /etc/x 2>/dev/null && echo ro`)
			if r.code != 0 || !strings.Contains(r.out, "hello") || !strings.Contains(r.out, "home="+HomeDir) || !strings.HasSuffix(strings.TrimSpace(r.out), "ro") {
				t.Fatalf("workspace, /tmp, home or read-only system: exit %d, %q", r.code, r.out)
			}
			if strings.Contains(r.out, "pibot-host-tmp") {
				t.Errorf("/tmp is not private: %q", r.out)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "made.txt")); err != nil || string(b) != "made\n" {
				t.Errorf("write in the workspace: %q, %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(os.TempDir(), "t")); err == nil {
				t.Error("a file written to /tmp in the sandbox appeared on the host")
			}
		})
	}
	// The secrets are untouched on the host.
	if b, _ := os.ReadFile(inWS); string(b) != "TOKEN-SECRET" {
		t.Errorf("masked file changed on the host: %q", b)
	}
}

// TestRealSandboxHidesDeniedInSystemDir checks that a configuration
// inside a mounted system directory (here /opt, as in /opt/pibot) is
// hidden, and its directory too when it is denied.
func TestRealSandboxHidesDeniedInSystemDir(t *testing.T) {
	if st, err := os.Stat("/opt"); err != nil || !st.IsDir() {
		t.Skip("no /opt on this host")
	}
	dir, err := os.MkdirTemp("/opt", "pibot-sandbox-test-")
	if err != nil {
		t.Skipf("cannot create a directory in /opt: %v", err)
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "pibot.yaml")
	writeFile(t, cfg, "token: CONFIG-SECRET")
	data := filepath.Join(dir, "data")
	writeFile(t, filepath.Join(data, "pairing.json"), "PAIRING-SECRET")
	writeFile(t, filepath.Join(dir, "readme"), "visible")
	// Deny through a symlink: the real path is what gets hidden.
	link := filepath.Join(hostDir(t), "cfg-link")
	if err := os.Symlink(cfg, link); err != nil {
		t.Fatal(err)
	}
	s := realSandbox(t, link, data)
	ws := t.TempDir()
	r := run(t, s, ws, false, "cat "+dir+"/readme; cat "+cfg+"; cat "+data+"/pairing.json")
	if strings.Contains(r.out, "SECRET") || !strings.Contains(r.out, "visible") {
		t.Errorf("output %q", r.out)
	}
	if r := run(t, s, ws, false, "ls -A "+data); strings.TrimSpace(r.out) != "" {
		t.Errorf("ls %s = %q", data, r.out)
	}
}

// perlConnect connects to the Unix socket named by its argument ("@name"
// is abstract) and prints "connected". perl-base is essential on Debian.
const perlConnect = `use Socket; my $a = $ARGV[0]; $a =~ s/^@/\0/; socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!\n"; connect($s, pack_sockaddr_un($a)) or die "connect: $!\n"; print "connected\n";`

// TestRealSandboxUnixSockets replays "sandboxed bash reaches Unix sockets
// (Docker, databases) with allow_network: false": a socket listening in
// /run, as docker.sock and database sockets do, and an abstract socket.
// With the network off neither is reachable; with it on, /run is still
// not mounted, and abstract sockets, which belong to the network
// namespace, are reachable as the host network is.
func TestRealSandboxUnixSockets(t *testing.T) {
	if _, err := exec.LookPath("perl"); err != nil {
		t.Skip("perl is not installed")
	}
	runDir, err := os.MkdirTemp("/run", "pibot-sandbox-test-")
	if err != nil {
		t.Skipf("cannot create a directory in /run: %v", err)
	}
	defer os.RemoveAll(runDir)
	path := filepath.Join(runDir, "db.sock")
	abstract := fmt.Sprintf("@pibot-sandbox-test-%d", os.Getpid())
	for _, addr := range []string{path, abstract} {
		ln, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	// The client works outside the sandbox: the test can fail.
	for _, addr := range []string{path, abstract} {
		out, err := exec.CommandContext(t.Context(), "perl", "-e", perlConnect, addr).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "connected") {
			t.Fatalf("host connect %s: %v %s", addr, err, out)
		}
	}
	s := realSandbox(t)
	ws := t.TempDir()
	cases := []struct {
		addr      string
		allowNet  bool
		reachable bool
	}{
		{path, false, false},
		{abstract, false, false},
		{path, true, false},
		{abstract, true, true},
	}
	for _, c := range cases {
		r := run(t, s, ws, c.allowNet, "perl -e '"+perlConnect+"' "+c.addr)
		if got := strings.Contains(r.out, "connected") && r.code == 0; got != c.reachable {
			t.Errorf("allow_network=%v: %s reachable=%v, want %v (%q)", c.allowNet, c.addr, got, c.reachable, r.out)
		}
	}
}

// TestRealSandboxMounts runs the further mounts through the real bwrap:
// a read-only directory with a writable one inside, a read-only file
// inside that, and a read-only file inside the workspace. What Sees says
// of each is what a sandboxed command finds: readable, and writable
// exactly where Sees says ReadWrite; nothing else of the host appears.
func TestRealSandboxMounts(t *testing.T) {
	host := hostDir(t)
	ws, repo := filepath.Join(host, "ws"), filepath.Join(host, "repo")
	objects := filepath.Join(repo, "objects")
	for p, c := range map[string]string{
		filepath.Join(ws, "file"): "ws", filepath.Join(ws, ".git"): "gitdir", filepath.Join(repo, "config"): "config",
		filepath.Join(objects, "obj"): "obj", filepath.Join(objects, "info", "alternates"): "alt",
		filepath.Join(host, "other", "secret"): "secret",
	} {
		writeFile(t, p, c)
	}
	s := realSandbox(t)
	mounts := []Mount{{Path: repo}, {Path: objects, Write: true}, {Path: filepath.Join(objects, "info")}, {Path: filepath.Join(ws, ".git")}}
	l := Layout{Workspace: ws, Mounts: mounts}
	for _, p := range []string{
		filepath.Join(ws, "file"), filepath.Join(ws, ".git"), filepath.Join(repo, "config"), filepath.Join(objects, "obj"),
		filepath.Join(objects, "info", "alternates"), filepath.Join(host, "other", "secret"),
	} {
		argv := s.Wrap([]string{"/bin/bash", "-c", "cat " + p + " >/dev/null 2>&1 && echo READABLE; echo x >> " + p + " 2>/dev/null && echo WRITABLE"}, ws, ws, false, mounts...)
		out, _ := exec.CommandContext(t.Context(), argv[0], argv[1:]...).CombinedOutput()
		got := l.Sees(p)
		if readable := strings.Contains(string(out), "READABLE"); readable != (got == ReadOnly || got == ReadWrite) {
			t.Errorf("%s: Sees = %v, readable in the sandbox: %v (%q)", p, got, readable, out)
		}
		if writable := strings.Contains(string(out), "WRITABLE"); writable != (got == ReadWrite) {
			t.Errorf("%s: Sees = %v, writable in the sandbox: %v (%q)", p, got, writable, out)
		}
	}
	// New files: in the writable directory, never in the read-only ones.
	for dir, want := range map[string]bool{objects: true, repo: false, filepath.Join(objects, "info"): false} {
		argv := s.Wrap([]string{"/bin/bash", "-c", "touch " + filepath.Join(dir, "new") + " && echo MADE"}, ws, ws, false, mounts...)
		out, _ := exec.CommandContext(t.Context(), argv[0], argv[1:]...).CombinedOutput()
		if made := strings.Contains(string(out), "MADE"); made != want {
			t.Errorf("a new file in %s: made %v, want %v (%q)", dir, made, want, out)
		}
	}
}
