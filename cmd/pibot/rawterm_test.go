//go:build linux

package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPty opens a pseudo-terminal pair: the controlling side and the
// terminal a program sees.
func openPty(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

func TestRawModeOnPty(t *testing.T) {
	_, pts := openPty(t)
	fd := int(pts.Fd())
	if !isTerminal(pts) {
		t.Fatal("a pty is not seen as a terminal")
	}
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Col: 100, Row: 30}); err != nil {
		t.Fatal(err)
	}
	if c, r := termSize(fd); c != 100 || r != 30 {
		t.Errorf("termSize = %d×%d", c, r)
	}
	before, _ := unix.IoctlGetTermios(fd, unix.TCGETS)
	restore, err := rawMode(fd)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := unix.IoctlGetTermios(fd, unix.TCGETS)
	if raw.Lflag&(unix.ICANON|unix.ECHO) != 0 || raw.Lflag&unix.ISIG == 0 {
		t.Errorf("raw mode lflag %#x: want no ICANON/ECHO, ISIG kept", raw.Lflag)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	after, _ := unix.IoctlGetTermios(fd, unix.TCGETS)
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag {
		t.Errorf("mode not restored: %#x → %#x", before.Lflag, after.Lflag)
	}
	if _, err := rawMode(-1); err == nil {
		t.Error("raw mode on a bad fd succeeded")
	}
	if c, r := termSize(-1); c != 0 || r != 0 {
		t.Errorf("termSize of a bad fd = %d×%d", c, r)
	}
}

// ptyChat runs `pibot chat` on a pseudo-terminal, types keys once out
// shows ready, and returns everything the terminal showed once the chat
// exits.
func ptyChat(t *testing.T, dir, cfg string, turns []ptyTurn) string {
	t.Helper()
	p := startPtyChat(t, dir, cfg)
	for _, turn := range turns {
		p.waitShown(t, turn.after, max(1, turn.times))
		p.typeKeys(t, turn.keys)
	}
	return p.wait(t)
}

// ptyRun is `pibot chat` running on a pseudo-terminal 80×24.
type ptyRun struct {
	ptm, pts *os.File
	cmd      *exec.Cmd
	before   *unix.Termios

	mu    sync.Mutex
	shown strings.Builder
}

// startPtyChat starts `pibot chat -c cfg` in dir on a pseudo-terminal.
func startPtyChat(t *testing.T, dir, cfg string) *ptyRun {
	t.Helper()
	ptm, pts := openPty(t)
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: 80, Row: 24}); err != nil {
		t.Fatal(err)
	}
	before, _ := unix.IoctlGetTermios(int(pts.Fd()), unix.TCGETS)
	cmd := exec.CommandContext(t.Context(), binary, "chat", "-c", cfg)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TERM=xterm"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{ptm: ptm, pts: pts, cmd: cmd, before: before}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptm.Read(buf)
			p.mu.Lock()
			p.shown.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return p
}

// text is everything the terminal showed so far.
func (p *ptyRun) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.shown.String()
}

// waitShown waits until the terminal has shown s n times.
func (p *ptyRun) waitShown(t *testing.T, s string, n int) {
	t.Helper()
	waitShown(t, p.text, s, n)
}

// typeKeys types keys.
func (p *ptyRun) typeKeys(t *testing.T, keys string) {
	t.Helper()
	if _, err := p.ptm.WriteString(keys); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the chat to exit, checks the terminal's mode was
// restored, and returns everything the terminal showed.
func (p *ptyRun) wait(t *testing.T) string {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("pibot chat: %v\n%s", err, p.text())
	}
	after, _ := unix.IoctlGetTermios(int(p.pts.Fd()), unix.TCGETS)
	if after.Lflag != p.before.Lflag {
		t.Errorf("terminal mode not restored: lflag %#x, was %#x", after.Lflag, p.before.Lflag)
	}
	// What the chat printed last may still be on its way: it is all
	// read once a mark written after it arrives.
	const end = "<pty end>"
	if _, err := p.pts.WriteString(end); err != nil {
		t.Fatal(err)
	}
	p.waitShown(t, end, 1)
	return strings.TrimSuffix(p.text(), end)
}

// ptyTurn is keys typed once the terminal has shown after (times times).
type ptyTurn struct {
	after string
	times int
	keys  string
}

// waitShown waits (for an event, with a generous safety limit) until the
// terminal output contains s n times.
func waitShown(t *testing.T, text func() string, s string, n int) {
	t.Helper()
	for range 3000 {
		if strings.Count(text(), s) >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("terminal never showed %q:\n%q", s, text())
}

// TestChatOnPty drives the terminal chat on a pseudo-terminal: the line is
// edited (the typo fixed with backspace), the answer arrives, Ctrl-D ends
// the chat with the terminal restored; a second chat says which session it
// resumed, and ↑ is history within a chat.
func TestChatOnPty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", fauxConfig)
	out := ptyChat(t, dir, cfg, []ptyTurn{
		{"› ", 1, "hello ptyx\x7f\r"},
		{"pibot without an API key.\r\n", 1, "\x04"},
	})
	if !strings.Contains(out, "You said: hello pty") || strings.Contains(out, "resumed session") {
		t.Fatalf("first chat:\n%q", out)
	}
	out = ptyChat(t, dir, cfg, []ptyTurn{
		{"› ", 1, "again\r"},
		{"pibot without an API key.\r\n", 1, "\x1b[A\r"},
		{"pibot without an API key.\r\n", 2, "\x04"},
	})
	if n := strings.Count(out, "› again\r\n"); n != 2 {
		t.Errorf("↑ did not send the last line again (%d lines sent):\n%q", n, out)
	}
	if !strings.Contains(out, "resumed session ") || !strings.Contains(out, ", 2 messages; /new for a fresh one") {
		t.Fatalf("second chat does not say it resumed:\n%q", out)
	}
}
