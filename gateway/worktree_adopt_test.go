package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/internal/worktree"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// crashingWorktrees makes the first worktree for real, then fails the
// way pibot dying before the worktree's record would leave it: the
// worktree and its branch made, no session entry naming them.
type crashingWorktrees struct {
	*worktree.Manager
	crashed atomic.Bool
	claimed atomic.Int32
}

func (c *crashingWorktrees) Claim(t worktree.Tree) error {
	c.claimed.Add(1)
	return c.Manager.Claim(t)
}

func (c *crashingWorktrees) Create(ctx context.Context, name, from, key string) (worktree.Tree, error) {
	t, err := c.Manager.Create(ctx, name, from, key)
	if err == nil && c.crashed.CompareAndSwap(false, true) {
		return worktree.Tree{}, errors.New("killed between the worktree and its record")
	}
	return t, err
}

// editorScript is the editor model's script, long enough for a test.
func editorScript() []faux.Turn {
	script := make([]faux.Turn, 40)
	for i := range script {
		script[i] = faux.Turn{Reply: editor}
	}
	return script
}

// A worktree made for a thread before a crash and never recorded is the
// one the thread's next run works in after the restart: no "-2" branch,
// and /diff shows the run's change there.
func TestWorktreeMadeBeforeACrashIsAdopted(t *testing.T) {
	repo := gitRepo(t)
	m, err := worktree.New(t.Context(), repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	cw := &crashingWorktrees{Manager: m}
	h := newHarness(t, editorScript(), withConfig(func(c *gateway.Config) {
		c.Workspace = repo
		c.Worktrees = cw
		c.Tools = func(r gateway.ToolRun) []agent.Tool {
			dir := r.Dir
			if dir == "" {
				dir = repo
			}
			return []agent.Tool{dirWrite{dir: dir}}
		}
	}))
	conv := chat.ConvRef{Platform: groupConv.Platform, Channel: groupConv.Channel, Thread: "c"}
	h.send("edit lost", inConv(conv), mentioned())
	h.waitText(conv, "worktree could not be made")
	settled(h)
	if got := gitIn(t, repo, "branch", "--list", "pibot/*", "--format=%(refname:short)"); got != "pibot/test-group-c" {
		t.Fatalf("branches after the crash: %q; the test needs the orphan", got)
	}
	h.restart()
	h.send("edit kept", inConv(conv), mentioned())
	h.waitText(conv, "done kept")
	settled(h)
	if got := gitIn(t, repo, "branch", "--list", "pibot/*", "--format=%(refname:short)"); got != "pibot/test-group-c" {
		t.Fatalf("branches after the restart: %q, want the orphan adopted", got)
	}
	if b, err := os.ReadFile(filepath.Join(repo, worktree.Dir, "test-group-c", "shared.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the adopted worktree's file: %q %v", b, err)
	}
	if d := h.answer(conv, "owner", "/diff"); !strings.Contains(d, "+kept") || !strings.Contains(d, "test-group-c`") {
		t.Fatalf("/diff:\n%s", d)
	}
	if got := cw.claimed.Load(); got != 1 {
		t.Fatalf("Claim called %d times, want once (before the adopted worktree's record)", got)
	}
}

// Cluster mode: a thread's worktree made by replica A is the one replica
// B works in once it takes the session over (A stopped): B finds the
// worktree from the session's record, writes there, makes no branch of
// its own, and /diff on B shows both runs' change against the base.
func TestClusterWorktreeKeptByTheReplicaThatTakesOver(t *testing.T) {
	_, prefix := redistest.LocalPrefix(t, "gateway")
	dir, repo := t.TempDir(), gitRepo(t)
	model := faux.New(llm.ModelInfo{ID: "m", Provider: "faux", API: faux.API, ContextWindow: 1 << 20, MaxTokens: 1000}, editorScript()...)
	dirs := &dirsSeen{}
	replica := func(id string) redisReplica {
		m, err := worktree.New(t.Context(), repo, nil) // each replica its own manager of the shared repository
		if err != nil {
			t.Fatal(err)
		}
		return redisReplica{prefix: prefix, id: id, poll: 50 * time.Millisecond, leaseTTL: 2 * time.Second,
			mod: func(c *gateway.Config) {
				c.Workspace = repo
				c.Worktrees = m
				c.Tools = func(r gateway.ToolRun) []agent.Tool {
					dir := r.Dir
					if dir == "" {
						dir = repo // the tools' specs, asked without a run
					} else {
						dirs.add(id + " " + dir)
					}
					return []agent.Tool{dirWrite{dir: dir}}
				}
			}}
	}
	adA := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	adB := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	say := func(ad *chattest.Adapter, n int, text, want string) string {
		t.Helper()
		in := benchMessage(ad.Platform(), 1, n, text)
		in.DedupKey = fmt.Sprintf("worktree:%d", n)
		in.Command = chat.ParseCommand(text, "")
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if err := ad.Inject(ctx, in); err != nil {
			t.Fatal(err)
		}
		var found string
		if err := ad.WaitFor(ctx, func([]chattest.Call) bool {
			for _, m := range ad.Messages(in.Conv) {
				if strings.Contains(m, want) {
					found = m
					return true
				}
			}
			return false
		}); err != nil {
			t.Fatalf("no %q after %q; chat: %q", want, text, ad.Messages(in.Conv))
		}
		return found
	}
	a := startRedisReplica(t, adA, model, dir, replica("replica-a"))
	say(adA, 0, "edit one", "done one")
	branch := worktree.Name(string(adA.Platform()), "dm1")
	tree := filepath.Join(repo, worktree.Dir, strings.TrimPrefix(branch, worktree.Prefix))
	if b, err := os.ReadFile(filepath.Join(tree, "shared.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("A's write in %s: %q %v", tree, b, err)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("stop replica A: %v", err)
	}
	startRedisReplica(t, adB, model, dir, replica("replica-b"))
	say(adB, 1, "edit two", "done two")
	diff := say(adB, 2, "/diff", "+two")
	if !strings.Contains(diff, "-base") || strings.Contains(diff, "+one") {
		t.Fatalf("/diff on B:\n%s", diff)
	}
	if got := gitIn(t, repo, "branch", "--list", "pibot/*", "--format=%(refname:short)"); got != branch {
		t.Fatalf("branches: %q, want only %s", got, branch)
	}
	if b, err := os.ReadFile(filepath.Join(tree, "shared.txt")); err != nil || string(b) != "two\n" {
		t.Fatalf("B's write in %s: %q %v", tree, b, err)
	}
	var sawB bool
	for _, d := range dirs.list() {
		if strings.HasPrefix(d, "replica-b ") {
			sawB = true
			if d != "replica-b "+tree {
				t.Errorf("B's tools worked in %s, want %s", d, tree)
			}
		}
	}
	if !sawB {
		t.Fatal("B's run asked for no tools")
	}
	if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("the main checkout changed: %q", st)
	}
}
