package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSeesMatchesBwrap is the conformance test of Layout.Sees against
// the real bwrap: for host files of every kind (the workspace, a masked
// file inside it, system files, host secrets, /tmp, /var/tmp, /root,
// /proc, /dev), what Sees says is what a sandboxed command finds: the
// host's content exactly when it says ReadOnly or ReadWrite, and a
// host file writable exactly when it says ReadWrite.
func TestSeesMatchesBwrap(t *testing.T) {
	host := hostDir(t)
	ws := filepath.Join(host, "pibot-workspace")
	inWS := filepath.Join(ws, "token.txt")
	writeFile(t, filepath.Join(ws, "hello.txt"), "hello")
	writeFile(t, inWS, "TOKEN-SECRET")
	writeFile(t, filepath.Join(host, "other.txt"), "other")
	hostTmp, err := os.MkdirTemp("", "pibot-host-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(hostTmp)
	writeFile(t, filepath.Join(hostTmp, "x"), "TMP")
	s := realSandbox(t, inWS)
	l := Layout{Workspace: ws, Deny: []string{inWS}}

	paths := []string{
		filepath.Join(ws, "hello.txt"), inWS, filepath.Join(host, "other.txt"), filepath.Join(hostTmp, "x"),
		"/etc/hostname", "/etc/passwd", "/etc/shadow", "/etc/gshadow", "/usr/bin/env", "/root/.bashrc",
		"/proc/1/status", "/proc/self/status", "/var/log/dpkg.log", "/etc/os-release",
	}
	if r, err := filepath.EvalSymlinks("/bin/sh"); err == nil {
		paths = append(paths, r)
	}
	checked := 0
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue // nothing to compare with on this host
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		want := hex.EncodeToString(sum[:])
		r := run(t, s, ws, false, "sha256sum < "+p+" 2>/dev/null | cut -d' ' -f1; test -w "+p+" && touch "+p+" 2>/dev/null && echo WRITABLE")
		same := strings.Contains(r.out, want)
		writable := strings.Contains(r.out, "WRITABLE")
		got := l.Sees(real)
		if (got == ReadOnly || got == ReadWrite) != same {
			t.Errorf("%s: Sees = %v, but the sandbox shows the host's content: %v (%q)", p, got, same, r.out)
		}
		if same && (got == ReadWrite) != writable {
			t.Errorf("%s: Sees = %v, but writable in the sandbox: %v (%q)", p, got, writable, r.out)
		}
		checked++
	}
	if checked < 8 {
		t.Fatalf("only %d paths compared", checked)
	}
	for p, want := range map[string]Access{
		"/proc/self/environ": Hidden, "/dev/sda": Hidden, "/sys/kernel": Hidden, "/tmp/x": Private,
		HomeDir + "/x": Private, "/home/someone": Hidden, "/run/docker.sock": Hidden, "/usr/lib": ReadOnly,
		ws: ReadWrite, filepath.Join(ws, "new/file"): ReadWrite, inWS: Hidden,
	} {
		if got := l.Sees(p); got != want {
			t.Errorf("Sees(%s) = %v, want %v", p, got, want)
		}
	}
}
