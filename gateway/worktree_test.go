package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/worktree"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// gitIn runs git in dir for the test's setup and checks.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepo makes a repository whose one commit has shared.txt.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, dir, "add", "shared.txt")
	gitIn(t, dir, "commit", "-q", "-m", "base")
	return dir
}

// barrier holds the first two calls until both are in flight.
type barrier struct {
	calls atomic.Int32
	both  sync.WaitGroup
}

func newBarrier() *barrier {
	b := &barrier{}
	b.both.Add(2)
	return b
}

func (b *barrier) pass() {
	if b != nil && b.calls.Add(1) <= 2 {
		b.both.Done()
		b.both.Wait()
	}
}

// dirWrite is a write tool that writes where its run works (ToolRun.Dir,
// else the workspace), as the real tools do; the barrier (nil: none)
// holds the first calls until two runs are in them together.
type dirWrite struct {
	dir     string
	barrier *barrier
}

func (w dirWrite) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "write", Description: "write a file", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (w dirWrite) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a struct{ Path, Content string }
	if err := json.Unmarshal(raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	w.barrier.pass()
	if err := os.WriteFile(filepath.Join(w.dir, a.Path), []byte(a.Content), 0o644); err != nil {
		return llm.ToolOutput{}, err
	}
	return llm.ToolOutput{Content: []llm.Content{llm.TextBlock("wrote " + a.Path)}}, nil
}

// editor is the scripted model: "edit TEXT" (or "slowly TEXT") writes
// shared.txt with TEXT, the tool's result is answered "done TEXT" (slowly
// for "slowly"), anything else "ok".
func editor(req llm.Request) faux.Turn {
	last := req.Messages[len(req.Messages)-1]
	if last.Role == llm.RoleToolResult {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == llm.RoleUser {
				if text, ok := strings.CutPrefix(m.Text(), "slowly "); ok {
					// Streamed slowly: a stop finds the run between the
					// write and its answer.
					return faux.Text("done " + text).WithDelay(300 * time.Millisecond)
				}
				return faux.Text("done " + strings.TrimPrefix(m.Text(), "edit "))
			}
		}
	}
	text, ok := strings.CutPrefix(last.Text(), "edit ")
	if !ok {
		text, ok = strings.CutPrefix(last.Text(), "slowly ")
	}
	if ok {
		args, _ := json.Marshal(map[string]string{"path": "shared.txt", "content": text + "\n"})
		return faux.ToolCalls(faux.Call(fmt.Sprintf("c-%d", len(req.Messages)), "write", string(args)))
	}
	return faux.Text("ok")
}

// settled waits until the runs have ended (their messages left the
// inbox).
func settled(h *harness) {
	h.t.Helper()
	h.waitFor("the runs' end", func() bool { return h.inbox.Len() == 0 })
}

// worktreeHarness runs the default agent with worktree: per_thread over a
// repository; barrier, when set, holds each write until both are in
// flight.
func worktreeHarness(t *testing.T, barrier *barrier) (*harness, string, *dirsSeen) {
	repo := gitRepo(t)
	m, err := worktree.New(t.Context(), repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	script := make([]faux.Turn, 40)
	for i := range script {
		script[i] = faux.Turn{Reply: editor}
	}
	seen := &dirsSeen{}
	h := newHarness(t, script, withConfig(func(c *gateway.Config) {
		c.Workspace = repo
		c.Worktrees = m
		c.DrainTimeout = 100 * time.Millisecond // a stop interrupts runs at once
		c.ToolPaths = func(dir, _ string, _ json.RawMessage) ([]gateway.ToolPath, error) {
			seen.add(dir)
			return nil, nil
		}
		c.Tools = func(r gateway.ToolRun) []agent.Tool {
			dir := r.Dir
			if dir == "" {
				dir = repo
			}
			return []agent.Tool{dirWrite{dir: dir, barrier: barrier}}
		}
	}))
	return h, repo, seen
}

// dirsSeen are the directories the approvals asked ToolPaths about.
type dirsSeen struct {
	mu   sync.Mutex
	dirs []string
}

func (d *dirsSeen) add(dir string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirs = append(d.dirs, dir)
}

func (d *dirsSeen) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.dirs)
	slices.Sort(out)
	return out
}

// Two threads of one channel edit the same file of one repository at the
// same time: each change is on its own branch, /diff shows each thread its
// own, and a restart in between changes none of it.
func TestWorktreePerThread(t *testing.T) {
	h, repo, seen := worktreeHarness(t, newBarrier())
	one := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "t1"}
	two := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "t2"}
	h.send("edit from one", inConv(one), mentioned())
	h.send("edit from two", inConv(two), mentioned())
	h.waitText(one, "done from one")
	h.waitText(two, "done from two")
	settled(h)

	// The model was told where each thread works.
	told := 0
	for _, req := range h.model.Requests() {
		if strings.Contains(req.SystemPrompt, "git worktree of its own: "+filepath.Join(repo, worktree.Dir, "test-group-t")) {
			told++
		}
	}
	if told != 4 {
		t.Fatalf("%d requests named the worktree, want 4", told)
	}
	// The approvals judged each call's paths in its worktree.
	root := filepath.Join(repo, worktree.Dir)
	if got := seen.list(); !slices.Equal(got, []string{filepath.Join(root, "test-group-t1"), filepath.Join(root, "test-group-t2")}) {
		t.Fatalf("tool paths asked in %q", got)
	}
	h.restart()
	diffOne := h.answer(one, "owner", "/diff")
	diffTwo := h.answer(two, "owner", "/diff")
	if !strings.Contains(diffOne, "+from one") || strings.Contains(diffOne, "from two") || !strings.Contains(diffOne, "-base") {
		t.Fatalf("/diff in thread one:\n%s", diffOne)
	}
	if !strings.Contains(diffTwo, "+from two") || strings.Contains(diffTwo, "from one") {
		t.Fatalf("/diff in thread two:\n%s", diffTwo)
	}
	wtOne, wtTwo := h.answer(one, "bob", "/worktree"), h.answer(two, "bob", "/worktree")
	if !strings.Contains(wtOne, "`pibot/test-group-t1`") || !strings.Contains(wtTwo, "`pibot/test-group-t2`") ||
		!strings.Contains(wtOne, ".pibot-worktrees/test-group-t1") || strings.Contains(wtOne, repo) {
		t.Fatalf("/worktree: %q / %q", wtOne, wtTwo)
	}
	if st := h.answer(one, "owner", "/status"); !strings.Contains(st, "worktree: `.pibot-worktrees/test-group-t1` on branch `pibot/test-group-t1`") {
		t.Fatalf("/status: %q", st)
	}
	// Each file on disk is its thread's; the main checkout is untouched.
	for conv, want := range map[string]string{"test-group-t1": "from one\n", "test-group-t2": "from two\n", "": "base\n"} {
		p := filepath.Join(repo, worktree.Dir, conv, "shared.txt")
		if conv == "" {
			p = filepath.Join(repo, "shared.txt")
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", p, b, err, want)
		}
	}
	if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the main checkout changed: %q", st)
	}
	// After the restart thread one works on in its own worktree, also when
	// the message replies to the latest answer: no new branch.
	h.send("edit again", inConv(one), mentioned(), replyTo(answerRef(h, one, "done from one")))
	h.waitText(one, "done again")
	settled(h)
	if got := gitIn(t, repo, "branch", "--list", "pibot/*", "--format=%(refname:short)"); got != "pibot/test-group-t1\npibot/test-group-t2" {
		t.Fatalf("branches: %q", got)
	}
	if d := h.answer(one, "owner", "/diff"); !strings.Contains(d, "+again") || strings.Contains(d, "from two") {
		t.Fatalf("/diff after the second edit:\n%s", d)
	}
}

// A fork starts a worktree of its own from the state the branch had at
// that point (the commit recorded there), and says so; the parent's
// worktree keeps its changes.
func TestWorktreeFork(t *testing.T) {
	h, repo, _ := worktreeHarness(t, nil)
	conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "f"}
	h.send("edit one", inConv(conv), mentioned())
	h.waitText(conv, "done one")
	settled(h)
	parent := filepath.Join(repo, worktree.Dir, "test-group-f")
	// The change is committed (as the agent's git would), and the next
	// runs change the file without committing.
	gitIn(t, parent, "commit", "-q", "-am", "one")
	one := gitIn(t, parent, "rev-parse", "HEAD")
	h.send("edit two", inConv(conv), mentioned())
	h.waitText(conv, "done two")
	settled(h)
	third := h.send("edit three", inConv(conv), mentioned())
	h.waitText(conv, "done three")
	settled(h)
	h.send("/fork", inConv(conv), replyTo(third.Msg))
	h.waitText(conv, "Forked")
	h.send("edit four", inConv(conv), mentioned())
	h.waitText(conv, "worktree of its own", "`pibot/test-group-f-2`", "from `pibot/test-group-f` at `"+one[:10]+"`", "not committed there")
	h.waitText(conv, "done four")
	settled(h)
	fork := filepath.Join(repo, worktree.Dir, "test-group-f-2")
	if b, err := os.ReadFile(filepath.Join(fork, "shared.txt")); err != nil || string(b) != "four\n" {
		t.Fatalf("fork's file %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(parent, "shared.txt")); err != nil || string(b) != "three\n" {
		t.Fatalf("parent's file %q %v", b, err)
	}
	if d := h.answer(conv, "owner", "/diff"); !strings.Contains(d, "-one") || !strings.Contains(d, "+four") || strings.Contains(d, "three") {
		t.Fatalf("/diff of the fork:\n%s", d)
	}
	if w := h.answer(conv, "owner", "/worktree"); !strings.Contains(w, "forked from `pibot/test-group-f`") {
		t.Fatalf("/worktree of the fork: %q", w)
	}
	// A reply to the first line's last answer goes back to that line, and
	// to its worktree.
	h.send("edit five", inConv(conv), mentioned(), replyTo(answerRef(h, conv, "done three")))
	h.waitText(conv, "done five")
	settled(h)
	if b, err := os.ReadFile(filepath.Join(parent, "shared.txt")); err != nil || string(b) != "five\n" {
		f, _ := os.ReadFile(filepath.Join(fork, "shared.txt"))
		t.Fatalf("parent's file after going back %q %v; fork %q; branches %s; msgs %q", b, err, f, gitIn(t, repo, "branch", "--list"), h.ad.Messages(conv))
	}
	if b, err := os.ReadFile(filepath.Join(fork, "shared.txt")); err != nil || string(b) != "four\n" {
		t.Fatalf("fork's file after going back %q %v", b, err)
	}
	if got := gitIn(t, repo, "branch", "--list", "pibot/*", "--format=%(refname:short)"); got != "pibot/test-group-f\npibot/test-group-f-2" {
		t.Fatalf("branches: %q", got)
	}
}

// answerRef is the chat message of the bot's answer in conv that says
// text.
func answerRef(h *harness, conv chat.ConvRef, text string) chat.MsgRef {
	h.t.Helper()
	for _, c := range h.ad.Calls() {
		if c.Conv == conv && c.Ref.ID != "" && strings.Contains(c.Text, text) {
			return c.Ref
		}
	}
	h.t.Fatalf("no answer %q in %s", text, conv.Key())
	return chat.MsgRef{}
}

// failingWorktrees makes no worktree.
type failingWorktrees struct{ gateway.Worktrees }

func (failingWorktrees) Create(context.Context, string, string, string) (worktree.Tree, error) {
	return worktree.Tree{}, fmt.Errorf("disk full")
}

// A thread whose worktree cannot be made runs nothing, and never in the
// shared workspace instead.
func TestWorktreeFailureRunsNothing(t *testing.T) {
	repo := gitRepo(t)
	h := newHarness(t, []faux.Turn{{Reply: editor}, {Reply: editor}}, withConfig(func(c *gateway.Config) {
		c.Workspace = repo
		c.Worktrees = failingWorktrees{}
		c.Tools = func(r gateway.ToolRun) []agent.Tool {
			dir := r.Dir
			if dir == "" {
				dir = repo
			}
			return []agent.Tool{dirWrite{dir: dir}}
		}
	}))
	conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "x"}
	h.send("edit lost", inConv(conv), mentioned())
	h.waitText(conv, "worktree could not be made")
	settled(h)
	if n := h.model.Calls(); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "shared.txt")); string(b) != "base\n" {
		t.Fatalf("the shared workspace was written: %q", b)
	}
}

// pruneRecorder records the prune calls.
type pruneRecorder struct {
	gateway.Worktrees
	idle chan time.Duration
}

func (p pruneRecorder) Prune(_ context.Context, idle time.Duration, _ time.Time) ([]string, error) {
	p.idle <- idle
	return nil, nil
}

// The gateway prunes each agent's idle worktrees after its prune time
// from its start on.
func TestWorktreePrunedAtStart(t *testing.T) {
	rec := pruneRecorder{idle: make(chan time.Duration, 4)}
	newHarness(t, nil, withConfig(func(c *gateway.Config) {
		c.Worktrees, c.WorktreePruneAfter = rec, 5*time.Hour
	}))
	select {
	case idle := <-rec.idle:
		if idle != 5*time.Hour {
			t.Fatalf("pruned after %s, want 5h", idle)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no prune")
	}
}

// A restart in the middle of a run (its file written, its answer not yet
// given) changes nothing: the resumed run works in the same worktree, no
// other is made, and the change is the thread's.
func TestWorktreeRestartMidRun(t *testing.T) {
	h, repo, _ := worktreeHarness(t, nil)
	conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "r"}
	tree := filepath.Join(repo, worktree.Dir, "test-group-r")
	h.send("slowly written", inConv(conv), mentioned())
	h.waitFor("the write", func() bool {
		b, _ := os.ReadFile(filepath.Join(tree, "shared.txt"))
		return string(b) == "written\n"
	})
	h.stop()
	if h.countIn("done written") != 0 {
		t.Fatal("the run answered before the stop; the test needs it cut")
	}
	h.start()
	h.waitText(conv, "done written")
	settled(h)
	if got := gitIn(t, repo, "branch", "--list", "pibot/*", "--format=%(refname:short)"); got != "pibot/test-group-r" {
		t.Fatalf("branches after the restart: %q", got)
	}
	if d := h.answer(conv, "owner", "/diff"); !strings.Contains(d, "+written") || !strings.Contains(d, "test-group-r`") {
		t.Fatalf("/diff after the restart:\n%s", d)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "shared.txt")); string(b) != "base\n" {
		t.Fatalf("the shared workspace was written: %q", b)
	}
}

// A fork whose point's commit git no longer has (the parent reset its
// branch, git collected the commit) starts from the parent's worktree as
// it is now, and says so.
func TestWorktreeForkPointGone(t *testing.T) {
	h, repo, _ := worktreeHarness(t, nil)
	conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "g"}
	parent := filepath.Join(repo, worktree.Dir, "test-group-g")
	h.send("edit one", inConv(conv), mentioned())
	h.waitText(conv, "done one")
	settled(h)
	base := gitIn(t, parent, "rev-parse", "HEAD")
	gitIn(t, parent, "commit", "-q", "-am", "one")
	one := gitIn(t, parent, "rev-parse", "HEAD")
	h.send("edit two", inConv(conv), mentioned())
	h.waitText(conv, "done two")
	settled(h)
	third := h.send("edit three", inConv(conv), mentioned())
	h.waitText(conv, "done three")
	settled(h)
	// The parent's branch goes back; git forgets the commit.
	gitIn(t, parent, "reset", "-q", "--hard", base)
	gitIn(t, repo, "reflog", "expire", "--expire=now", "--all")
	gitIn(t, repo, "gc", "-q", "--prune=now")
	if err := exec.Command("git", "-C", repo, "cat-file", "-e", one+"^{commit}").Run(); err == nil {
		t.Fatal("git still has the commit; the test needs it gone")
	}
	h.send("/fork", inConv(conv), replyTo(third.Msg))
	h.waitText(conv, "Forked")
	h.send("edit four", inConv(conv), mentioned())
	h.waitText(conv, "`pibot/test-group-g-2`", "Git no longer has `pibot/test-group-g`", "as it is now (`"+base[:10]+"`)")
	h.waitText(conv, "done four")
	settled(h)
	if b, err := os.ReadFile(filepath.Join(repo, worktree.Dir, "test-group-g-2", "shared.txt")); err != nil || string(b) != "four\n" {
		t.Fatalf("fork's file %q %v", b, err)
	}
}
