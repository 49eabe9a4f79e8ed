package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// The crash test drives the real binary: `pibot serve` with a config-only
// faux model (it echoes the user's message, 30 ms per token) and the web
// chat, killed with SIGKILL while a reply streams, then restarted.

const (
	crashConv   = "crashconv"
	crashCycles = 5
	// crashEchoEnd ends every faux echo answer (providers/faux.Echo).
	crashEchoEnd = "try pibot without an API key."
)

// crashPibot is one running `pibot serve` process.
type crashPibot struct {
	t      testing.TB
	cmd    *exec.Cmd
	base   string
	stderr *crashLog
	exited chan struct{}
}

// crashLog collects a process's stderr.
type crashLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *crashLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *crashLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// crashBuild builds cmd/pibot into a temporary directory.
func crashBuild(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pibot")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/pibot/pibot/cmd/pibot").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/pibot: %v\n%s", err, out)
	}
	return bin
}

// crashFreeAddr returns a loopback address that was free a moment ago.
// Another process may take it before pibot listens on it: crashStart then
// starts pibot again on another one.
func crashFreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// crashStartTries is how many addresses crashStart tries.
const crashStartTries = 5

// crashStart starts pibot serve -c cfg in dir, listening on addr, and
// waits for /readyz. addr overrides the file's http.listen (--listen):
// when another process took addr since crashFreeAddr found it free,
// pibot exits at once, and crashStart starts it again on another free
// address (the returned process's base has the one it listens on).
func crashStart(t testing.TB, bin, cfg, dir, addr string) *crashPibot {
	t.Helper()
	return crashStartEnv(t, bin, cfg, dir, addr, nil)
}

// crashStartEnv is crashStart with env added to pibot's environment.
func crashStartEnv(t testing.TB, bin, cfg, dir, addr string, env []string) *crashPibot {
	t.Helper()
	for try := 1; ; try++ {
		p, taken := crashStartOn(t, bin, cfg, dir, addr, env)
		if !taken {
			return p
		}
		if try == crashStartTries {
			t.Fatalf("pibot found %d free addresses taken before it listened:\n%s", try, p.stderr)
		}
		t.Logf("%s was taken before pibot listened on it; trying another address", addr)
		addr = crashFreeAddr(t)
	}
}

// crashStartOn starts pibot on addr, with env added to its environment,
// and waits for /readyz (waitReady); taken reports that pibot exited
// because another process listens on addr.
func crashStartOn(t testing.TB, bin, cfg, dir, addr string, env []string) (p *crashPibot, taken bool) {
	t.Helper()
	p, stdout := crashLaunch(t, bin, cfg, dir, addr, env...)
	taken, err := p.waitReady(stdout)
	if err != nil {
		t.Fatal(err)
	}
	return p, taken
}

// crashLaunch starts pibot serve -c cfg in dir on addr, with env added
// to its environment, and returns at once, with the process's stdout; the
// test's end kills it.
func crashLaunch(t testing.TB, bin, cfg, dir, addr string, env ...string) (*crashPibot, *crashLog) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "-c", cfg, "--listen", addr)
	cmd.Dir = dir
	cmd.Env = append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}, env...)
	return crashLaunchCmd(t, cmd, addr)
}

// crashLaunchCmd starts cmd, a pibot serve listening on addr, and returns
// at once, with the process's stdout; the test's end kills it.
func crashLaunchCmd(t testing.TB, cmd *exec.Cmd, addr string) (*crashPibot, *crashLog) {
	t.Helper()
	p := &crashPibot{t: t, cmd: cmd, base: "http://" + addr, stderr: &crashLog{}, exited: make(chan struct{})}
	stdout := &crashLog{}
	cmd.Stdout, cmd.Stderr = stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	return p, stdout
}

// waitReady waits for the /readyz of a pibot crashLaunch started, whose
// stdout is stdout; taken reports that it exited because another process
// listens on its address, and an error that it exited otherwise or was
// not ready within 15 s. /readyz is asked only once pibot said it
// listens: until then another process may hold the address and answer,
// or never answer. It may run on any goroutine.
func (p *crashPibot) waitReady(stdout *crashLog) (taken bool, err error) {
	deadline := time.Now().Add(15 * time.Second)
	for listening := false; ; {
		listening = listening || strings.Contains(stdout.String(), "pibot ready on "+p.base)
		if listening {
			resp, err := http.Get(p.base + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return false, nil
				}
			}
		}
		select {
		case <-p.exited:
			if strings.Contains(p.stderr.String(), syscall.EADDRINUSE.Error()) {
				return true, nil
			}
			return false, fmt.Errorf("pibot exited before it was ready:\n%s", p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("pibot not ready after 15 s:\n%s", p.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to go.
func (p *crashPibot) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop sends SIGTERM and waits for a clean exit.
func (p *crashPibot) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("pibot did not stop on SIGTERM:\n%s", p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Errorf("pibot exited with %d after SIGTERM:\n%s", code, p.stderr)
	}
}

// send posts a message to the web chat, as the browser does.
func (p *crashPibot) send(id, text string) {
	p.t.Helper()
	body, _ := json.Marshal(map[string]string{"conv": crashConv, "id": id, "text": text})
	resp, err := http.Post(p.base+"/api/send", "application/json", bytes.NewReader(body))
	if err != nil {
		p.t.Fatalf("send: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		p.t.Fatalf("send: %s: %s", resp.Status, b.String())
	}
}

// crashChat follows the web chat's event stream of crashConv: the latest
// text of every message, by id.
type crashChat struct {
	mu      sync.Mutex
	bot     map[string]string
	changed chan struct{}
}

// watch opens /api/events and follows it until the process or ctx ends.
func (p *crashPibot) watch(ctx context.Context) *crashChat {
	p.t.Helper()
	c := &crashChat{bot: map[string]string{}, changed: make(chan struct{})}
	// /readyz answers 200 before the gateway has started the web adapter,
	// which answers 503 until then: retry for a while.
	var resp *http.Response
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/api/events?conv="+crashConv, nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			p.t.Fatalf("events: %v", err)
		}
		if r.StatusCode == http.StatusOK {
			resp = r
			break
		}
		r.Body.Close()
		if r.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			p.t.Fatalf("events: %s", r.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ready := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct{ Type, ID, From, Text string }
			if json.Unmarshal([]byte(data), &ev) != nil {
				continue
			}
			switch {
			case ev.Type == "ready":
				close(ready)
			case ev.Type == "msg" && ev.From == "bot":
				c.mu.Lock()
				c.bot[ev.ID] = ev.Text
				close(c.changed)
				c.changed = make(chan struct{})
				c.mu.Unlock()
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		p.t.Fatal("events: no ready marker")
	}
	return c
}

// waitBot waits until some bot message satisfies cond.
func (c *crashChat) waitBot(t *testing.T, what string, d time.Duration, cond func(string) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		c.mu.Lock()
		for _, s := range c.bot {
			if cond(s) {
				c.mu.Unlock()
				return
			}
		}
		ch := c.changed
		var all []string
		for _, s := range c.bot {
			all = append(all, s)
		}
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("web chat: no bot message %s; bot messages:\n%s", what, strings.Join(all, "\n---\n"))
		}
	}
}

// crashMessages returns the messages on the branch of the only session's
// latest entry, read-only, and the number of user messages with each text
// in the whole file.
func crashMessages(t *testing.T, data string) ([]llm.Message, map[string]int) {
	t.Helper()
	var files []string
	_ = filepath.WalkDir(filepath.Join(data, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".jsonl") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) > 1 {
		t.Fatalf("one conversation made %d session files: %q", len(files), files)
	}
	if len(files) == 0 {
		return nil, nil
	}
	s, err := session.OpenFile(files[0], session.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open session: %v", err)
	}
	defer s.Close()
	if r := s.Report(); len(r.SkippedLines) > 0 {
		t.Errorf("session has bad lines in the middle: %+v", r)
	}
	users := map[string]int{}
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser {
			users[e.Message.Text()]++
		}
	}
	branch, err := s.Tree().Branch(s.Tree().Leaf())
	if err != nil {
		t.Fatalf("branch: %v", err)
	}
	var msgs []llm.Message
	for _, e := range branch {
		if e.Type == session.TypeMessage && e.Message != nil {
			msgs = append(msgs, *e.Message)
		}
	}
	return msgs, users
}

// crashAnswered reports whether text is on the branch exactly once and is
// followed by a complete echo answer.
func crashAnswered(msgs []llm.Message, text string) bool {
	for i, m := range msgs {
		if m.Role != llm.RoleUser || m.Text() != text {
			continue
		}
		if i+1 >= len(msgs) {
			return false
		}
		a := msgs[i+1]
		return a.Role == llm.RoleAssistant && a.StopReason == llm.StopStop &&
			strings.Contains(a.Text(), "You said: "+text) && strings.HasSuffix(a.Text(), crashEchoEnd)
	}
	return false
}

// crashInboxPending counts accepted messages in inbox.jsonl that were never
// acknowledged, reading the file without opening the inbox.
func crashInboxPending(t *testing.T, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "inbox.jsonl"))
	if err != nil {
		t.Fatalf("inbox: %v", err)
	}
	pending := map[string]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		var rec struct{ Op, ID string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Op {
		case "add", "keep": // keep: carried over from an earlier process
			pending[rec.ID] = true
		case "ack", "quarantine":
			delete(pending, rec.ID)
		}
	}
	return len(pending)
}

// crashOpenReplies counts the replies the session files still journal as
// streaming (the last pibot.reply or pibot.delivery entry of a location is
// a streaming pibot.reply: a restart edits its messages with a note), and
// the chat messages they name.
func crashOpenReplies(data string) (replies, refs int) {
	_ = filepath.WalkDir(filepath.Join(data, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return nil
		}
		s, err := session.OpenFile(path, session.Options{ReadOnly: true})
		if err != nil {
			return nil
		}
		defer s.Close()
		open := map[string]int{} // by location: refs of a streaming reply
		for _, e := range s.Tree().Entries() {
			if e.Type != session.TypeCustom || e.Pibot == nil {
				continue
			}
			switch e.CustomType {
			case "pibot.delivery":
				delete(open, e.Pibot.Loc)
			case "pibot.reply":
				var r struct {
					State string
					Refs  []json.RawMessage
				}
				_ = json.Unmarshal(e.Data, &r)
				if r.State == "streaming" {
					open[e.Pibot.Loc] = len(r.Refs)
				} else {
					delete(open, e.Pibot.Loc)
				}
			}
		}
		for _, n := range open {
			replies++
			refs += n
		}
		return nil
	})
	return replies, refs
}

func crashWait(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKillDuringStreamingReply kills pibot with SIGKILL at random points
// of a streaming reply (right after the message is acknowledged, or while
// the answer streams), restarts it, and checks that the user's message is
// in the session once, that the interrupted run is resumed and its
// complete answer reaches the chat, and that nothing stays pending.
func TestKillDuringStreamingReply(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	bin := crashBuild(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	addr := crashFreeAddr(t)
	cfg := filepath.Join(dir, "pibot.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
http:
  listen: %s
providers:
  f:
    api: faux
    models:
      - id: m
agent:
  model: f/m
`, data, addr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	p := crashStart(t, bin, cfg, dir, addr)
	var texts []string
	for i := range crashCycles {
		// About 40 words: the echo streams for about two seconds.
		text := fmt.Sprintf("message %d:%s", i, strings.Repeat(" please keep streaming", 13))
		texts = append(texts, text)
		ctx, cancel := context.WithCancel(t.Context())
		chat := p.watch(ctx)
		p.send(fmt.Sprintf("m%d", i), text)
		var point string
		if rng.IntN(4) == 0 {
			point = "right after the acknowledgement"
		} else {
			chat.waitBot(t, "streaming the answer", 10*time.Second, func(s string) bool { return strings.Contains(s, "You said") })
			delay := time.Duration(rng.Int64N(int64(800 * time.Millisecond)))
			time.Sleep(delay)
			point = fmt.Sprintf("%v into the streaming reply", delay.Round(time.Millisecond))
		}
		p.kill()
		cancel()
		_, journaled := crashOpenReplies(data)
		t.Logf("cycle %d: killed %s; reply messages journaled for marking: %d", i, point, journaled)
		// The killed process did not finish the answer.
		if msgs, _ := crashMessages(t, data); crashAnswered(msgs, text) {
			t.Fatalf("cycle %d: the answer was complete before the kill; the kill point is too late", i)
		}

		p = crashStart(t, bin, cfg, dir, addr)
		ctx, cancel = context.WithCancel(t.Context())
		chat = p.watch(ctx)
		chat.waitBot(t, "with the complete resumed answer", 20*time.Second, func(s string) bool {
			return strings.Contains(s, "You said: "+text) && strings.HasSuffix(s, crashEchoEnd)
		})
		cancel()
		crashWait(t, "the answer in the session", 10*time.Second, func() bool {
			msgs, _ := crashMessages(t, data)
			return crashAnswered(msgs, text)
		})
		crashWait(t, "no reply journaled as streaming", 10*time.Second, func() bool { n, _ := crashOpenReplies(data); return n == 0 })
		// The inbox lets go once the resumed run is over and on disk.
		crashWait(t, "an empty inbox", 10*time.Second, func() bool { return crashInboxPending(t, data) == 0 })
		logs := p.stderr.String()
		resumed := strings.Contains(logs, "resuming an interrupted run")
		replayed := strings.Contains(logs, "replaying an accepted message")
		if !resumed && !replayed {
			t.Errorf("cycle %d: the restart neither resumed the run nor replayed the message; log:\n%s", i, logs)
		}
		// The session journal named the cut reply: the restart marks it.
		// (The web chat keeps its messages in memory, so the edit itself
		// finds no message after a restart; gateway/crash_test.go checks
		// the edit on a chat that keeps them.)
		marked := strings.Contains(logs, "marking a reply cut off by a restart interrupted")
		if journaled > 0 && !marked {
			t.Errorf("cycle %d: the cut reply journaled in the session was not marked interrupted; log:\n%s", i, logs)
		}
		t.Logf("cycle %d: after the restart: run resumed %v, message replayed from the inbox %v, old reply marked %v",
			i, resumed, replayed, marked)
	}
	p.stop()

	msgs, users := crashMessages(t, data)
	for _, text := range texts {
		if users[text] != 1 {
			t.Errorf("user message %q is in the session %d times, want once", text[:10], users[text])
		}
		if !crashAnswered(msgs, text) {
			t.Errorf("user message %q has no complete answer on the branch", text[:10])
		}
	}
	if n := crashInboxPending(t, data); n != 0 {
		t.Errorf("%d accepted messages pending in the inbox after a clean stop", n)
	}
}

// TestCrashStartOnATakenAddress: another process listens on the address
// crashFreeAddr gave before pibot does; crashStart starts pibot on
// another one instead of failing the test.
func TestCrashStartOnATakenAddress(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	bin := crashBuild(t)
	dir := t.TempDir()
	addr := taken.Addr().String()
	cfg := filepath.Join(dir, "pibot.yaml")
	yaml := fmt.Sprintf("data_dir: %s\nhttp:\n  listen: %s\nproviders:\n  f:\n    api: faux\n    models:\n      - id: m\nagent:\n  model: f/m\n",
		filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	p := crashStart(t, bin, cfg, dir, addr)
	if p.base == "http://"+addr {
		t.Fatalf("pibot reported ready on %s, which another process holds", addr)
	}
	p.send("m0", "hello")
	p.stop()
}
