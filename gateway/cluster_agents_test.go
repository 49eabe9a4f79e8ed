package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// modelsByRef resolves model references from a fixed set.
type modelsByRef map[string]llm.Model

func (ms modelsByRef) Model(ref string) (llm.Model, error) {
	if m, ok := ms[ref]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("unknown model %s", ref)
}

// TestClusterAgentKeptByTheReplicaThatTakesOver: a conversation bound to
// agent ops on replica A keeps ops when replica B, whose bindings send
// it to the default agent, takes its session over once A stopped (B
// running all along, or started after): B runs it with ops's model,
// system prompt and tools, and the session still records ops with ops's
// workspace. (A replica that loses a lease while it runs on takes the
// session again itself, TestClusterRetakenSessionAnswersWhatTheLostLeaseCut.)
func TestClusterAgentKeptByTheReplicaThatTakesOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		early bool // B runs before A stops
	}{{"B running", true}, {"B started after", false}} {
		t.Run(tc.name, func(t *testing.T) { clusterAgentTakeover(t, tc.early) })
	}
}

func clusterAgentTakeover(t *testing.T, early bool) {
	_, prefix := redistest.LocalPrefix(t, "gateway")
	dir, opsWS := t.TempDir(), t.TempDir()
	info := func(id string) llm.ModelInfo {
		return llm.ModelInfo{ID: id, Provider: "faux", API: faux.API, ContextWindow: 1 << 20, MaxTokens: 1000}
	}
	opsModel, defModel := faux.New(info("ops"), faux.Text("ops answer")), faux.New(info("m"), faux.Text("default answer"))
	ms := modelsByRef{"faux/ops": opsModel, "faux/m": defModel}
	replica := func(id, bound string) redisReplica {
		return redisReplica{prefix: prefix, id: id, poll: 50 * time.Millisecond, leaseTTL: 2 * time.Second, models: ms,
			mod: func(c *gateway.Config) {
				c.SystemPrompt = func() string { return "DEFAULT PROMPT" }
				c.Tools = func(gateway.ToolRun) []agent.Tool { return []agent.Tool{&agenttest.Tool{Name: "defaulttool"}} }
				c.Agents = map[string]gateway.Agent{"ops": {
					Model:        "faux/ops",
					SystemPrompt: func() string { return "OPS PROMPT" },
					Workspace:    opsWS,
					Tools:        func(gateway.ToolRun) []agent.Tool { return []agent.Tool{&agenttest.Tool{Name: "opstool"}} },
				}}
				c.Route = func(chat.Inbound) (string, string) { return bound, "the replica's bindings: " + bound }
			}}
	}
	adA := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	adB := chattest.New(chattest.WithCaps(benchFastCaps, benchFastCaps))
	a := startRedisReplica(t, adA, defModel, dir, replica("replica-a", "ops"))
	say := func(ad *chattest.Adapter, n int, text, want string) {
		t.Helper()
		in := benchMessage(ad.Platform(), 1, n, text)
		in.User = chat.User{ID: "u1", Name: "User"}
		in.DedupKey = fmt.Sprintf("agents:%d", n)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		if err := ad.Inject(ctx, in); err != nil {
			t.Fatal(err)
		}
		if err := ad.WaitFor(ctx, func([]chattest.Call) bool {
			return strings.Contains(strings.Join(ad.Messages(in.Conv), "\n"), want)
		}); err != nil {
			t.Fatalf("no %q after %q; chat: %q", want, text, ad.Messages(in.Conv))
		}
	}
	say(adA, 0, "first, to A", "ops answer")
	// B runs with no binding for the conversation: its routing would give
	// a new session the default agent.
	b := replica("replica-b", gateway.DefaultAgent)
	if early {
		startRedisReplica(t, adB, defModel, dir, b)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("stop replica A: %v", err)
	}
	if !early {
		startRedisReplica(t, adB, defModel, dir, b)
	}
	say(adB, 1, "second, to B", "ops answer")

	reqs := opsModel.Requests()
	if len(reqs) != 2 {
		t.Fatalf("ops's model got %d requests, want 2 (A's and B's); the default model got %d", len(reqs), len(defModel.Requests()))
	}
	last := reqs[1]
	if got := lastUserText(last.Messages); !strings.Contains(got, "second, to B") {
		t.Fatalf("ops's model's second request is for %q", got)
	}
	if last.SystemPrompt != "OPS PROMPT" || toolNames(last) != "opstool" {
		t.Fatalf("B ran the conversation with prompt %q tools %q, want ops's", last.SystemPrompt, toolNames(last))
	}
	if n := len(defModel.Requests()); n != 0 {
		t.Fatalf("the default model got %d requests", n)
	}
	paths := sessionFiles(t, dir)
	if len(paths) != 1 {
		t.Fatalf("session files: %q, want one", paths)
	}
	if name, cwd := recordedAgent(t, paths[0]); name != "ops" || cwd != opsWS {
		t.Fatalf("the session records agent %q cwd %q, want ops %q", name, cwd, opsWS)
	}
}

// sessionFiles lists the session files under data directory dir.
func sessionFiles(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	_ = filepath.Walk(filepath.Join(dir, "sessions"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".jsonl") {
			paths = append(paths, p)
		}
		return nil
	})
	return paths
}

// recordedAgent returns the agent the session file at path records and
// its header's cwd.
func recordedAgent(t *testing.T, path string) (name, cwd string) {
	t.Helper()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, e := range s.Tree().Entries() {
		if e.Type == session.TypeCustom && e.CustomType == "pibot.agent" {
			var d struct{ Name string }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			name = d.Name
		}
	}
	return name, s.Tree().Header().Cwd
}
