package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// models serves one faux model as "faux/m".
type models struct{ m llm.Model }

func (ms models) Model(ref string) (llm.Model, error) {
	if ref != "faux/m" {
		return nil, fmt.Errorf("unknown model %s", ref)
	}
	return ms.m, nil
}

// harness runs a gateway on a chattest adapter and a faux model, in a
// data directory that survives restart().
type harness struct {
	t      *testing.T
	dir    string
	ad     *chattest.Adapter
	model  *faux.Model
	tools  []agent.Tool
	mod    func(*gateway.Config)
	policy access.Policy
	locker gateway.Locker
	budget gateway.Budget
	spend  gateway.SpendLimiter
	// index, when set, is the gateway's location index (else its own).
	index gateway.Index
	// wrap, when set, gives the gateway a wrapper of ad instead of ad.
	wrap func(*chattest.Adapter) chat.Adapter
	// wrapModel, when set, gives the gateway a wrapper of model.
	wrapModel func(llm.Model) llm.Model
	// caps, when set, changes the adapter's capabilities.
	caps func(*chat.Caps)
	// files, when set, writes the session files (Deps.SessionFiles).
	files session.Storage

	g      *gateway.Gateway
	cancel context.CancelFunc
	done   chan error
	inbox  *cluster.LocalInbox
	seq    atomic.Int64
}

type option func(*harness)

func withConfig(f func(*gateway.Config)) option  { return func(h *harness) { h.mod = f } }
func withTools(t ...agent.Tool) option           { return func(h *harness) { h.tools = t } }
func withLocker(l gateway.Locker) option         { return func(h *harness) { h.locker = l } }
func withBudget(b gateway.Budget) option         { return func(h *harness) { h.budget = b } }
func withSpend(l gateway.SpendLimiter) option    { return func(h *harness) { h.spend = l } }
func withIndex(ix gateway.Index) option          { return func(h *harness) { h.index = ix } }
func withSessionFiles(st session.Storage) option { return func(h *harness) { h.files = st } }
func withAdapter(wrap func(*chattest.Adapter) chat.Adapter) option {
	return func(h *harness) { h.wrap = wrap }
}
func withModel(wrap func(llm.Model) llm.Model) option {
	return func(h *harness) { h.wrapModel = wrap }
}
func withCaps(f func(*chat.Caps)) option { return func(h *harness) { h.caps = f } }

func newHarness(t *testing.T, script []faux.Turn, opts ...option) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), model: faux.New(llm.ModelInfo{ID: "m", Provider: "faux", ContextWindow: 100000, MaxTokens: 1000}, script...)}
	h.policy = access.Policy{Owners: []string{"test:owner"}, DMPolicy: "pairing", MentionRequired: true, Groups: []string{"test:group"}}
	for _, o := range opts {
		o(h)
	}
	fast := chat.Caps{Dialect: chat.DialectMarkdown, MaxLen: 4000, EditInterval: 50 * time.Millisecond}
	if h.caps != nil {
		h.caps(&fast)
	}
	if h.ad == nil {
		h.ad = chattest.New(chattest.WithCaps(fast, fast))
	}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) start() {
	t := h.t
	t.Helper()
	inbox, err := cluster.OpenInbox(filepath.Join(h.dir, "inbox.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var locker gateway.Locker = h.locker
	if locker == nil {
		l, err := cluster.NewLocker(h.dir)
		if err != nil {
			t.Fatal(err)
		}
		locker = l
	}
	store, err := access.OpenStore(filepath.Join(h.dir, "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{
		DataDir:         h.dir,
		Model:           "faux/m",
		Workspace:       h.dir,
		Tools:           func(gateway.ToolRun) []agent.Tool { return h.tools },
		ApprovalTimeout: 5 * time.Second,
		CollectDebounce: 100 * time.Millisecond,
		FinalWait:       5 * time.Second,
		// A short group commit: a run's messages leave the inbox soon
		// after it ends, so a test waits for that in tens of
		// milliseconds, not the default second (groupack_test.go tests
		// the long window itself).
		SessionGroupWindow: 20 * time.Millisecond,
	}
	if h.mod != nil {
		h.mod(&cfg)
	}
	var m llm.Model = h.model
	if h.wrapModel != nil {
		m = h.wrapModel(m)
	}
	var ad chat.Adapter = h.ad
	if h.wrap != nil {
		ad = h.wrap(h.ad)
	}
	g, err := gateway.New(cfg, gateway.Deps{
		Adapters:     []chat.Adapter{ad},
		Models:       models{m},
		Access:       access.NewChecker(h.policy, store),
		Inbox:        inbox,
		Dedupe:       cluster.NewDedupe(time.Hour, 1000),
		Locker:       locker,
		Budget:       h.budget,
		Spend:        h.spend,
		Index:        h.index,
		Notices:      store,
		SessionFiles: h.files,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.g, h.cancel, h.done, h.inbox = g, cancel, make(chan error, 1), inbox
	go func() { h.done <- g.Run(ctx) }()
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("gateway.Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		h.t.Error("gateway did not stop")
	}
	h.inbox.Close()
	h.cancel = nil
}

// restart stops the gateway and starts a new one on the same data dir
// with a fresh adapter state kept (the same chattest adapter).
func (h *harness) restart() {
	h.stop()
	h.start()
}

var dmConv = chat.ConvRef{Platform: "test", Channel: "dm1", DM: true}
var groupConv = chat.ConvRef{Platform: "test", Channel: "group"}

type msgOpt func(*chat.Inbound)

func from(user string) msgOpt {
	return func(in *chat.Inbound) { in.User = chat.User{ID: user, Name: user} }
}
func replyTo(ref chat.MsgRef) msgOpt { return func(in *chat.Inbound) { in.ReplyTo = &ref } }
func mentioned() msgOpt              { return func(in *chat.Inbound) { in.Mentioned = true } }
func dedup(key string) msgOpt        { return func(in *chat.Inbound) { in.DedupKey = key } }
func inConv(c chat.ConvRef) msgOpt   { return func(in *chat.Inbound) { in.Conv = c; in.Msg.Conv = c } }

// send injects a user message and returns it.
func (h *harness) send(text string, opts ...msgOpt) chat.Inbound {
	h.t.Helper()
	n := h.seq.Add(1)
	in := chat.Inbound{Kind: chat.KindMessage, Conv: dmConv, Msg: chat.MsgRef{Conv: dmConv, ID: fmt.Sprintf("u%d", n)}, User: chat.User{ID: "owner", Name: "Owner"}, Text: text, Time: time.Now()}
	for _, o := range opts {
		o(&in)
	}
	in.Msg.Conv = in.Conv
	in.Command = chat.ParseCommand(text, "")
	if in.Interaction != nil {
		// Where and by whom, as the platform says.
		in.Interaction.Conv, in.Interaction.User = in.Conv, in.User.ID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.ad.Inject(ctx, in); err != nil {
		h.t.Fatalf("inject %q: %v", text, err)
	}
	return in
}

// press injects a button press.
func (h *harness) press(conv chat.ConvRef, user, data string) {
	h.t.Helper()
	in := chat.Inbound{Kind: chat.KindAction, Conv: conv, User: chat.User{ID: user, Name: user}, Action: &chat.Action{Data: data}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.ad.Inject(ctx, in); err != nil {
		h.t.Fatalf("press %q: %v", data, err)
	}
}

// waitText waits until some message in conv contains all of subs.
func (h *harness) waitText(conv chat.ConvRef, subs ...string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := h.ad.WaitFor(ctx, func([]chattest.Call) bool {
		for _, m := range h.ad.Messages(conv) {
			ok := true
			for _, s := range subs {
				if !strings.Contains(m, s) {
					ok = false
				}
			}
			if ok {
				return true
			}
		}
		return false
	})
	if err != nil {
		h.t.Fatalf("no message with %q in %s; messages:\n%s", subs, conv.Key(), strings.Join(h.ad.Messages(conv), "\n---\n"))
	}
}

// waitIdle waits until no run is streaming (the last message is final).
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pendingOf lists the inbox items not yet acknowledged.
func pendingOf(h *harness) []cluster.InboxItem {
	h.t.Helper()
	return h.inbox.All()
}

// sessions returns the session files in the data dir.
func (h *harness) sessions() []string {
	var out []string
	filepath.Walk(filepath.Join(h.dir, "sessions"), func(p string, info os.FileInfo, err error) error {
		// A file being created is empty for an instant.
		if err == nil && !info.IsDir() && strings.HasSuffix(p, ".jsonl") && info.Size() > 0 {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// entries reads a session file read-only.
func (h *harness) entries(path string) []session.Entry {
	h.t.Helper()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		h.t.Fatal(err)
	}
	defer s.Close()
	return s.Tree().Entries()
}

// messages returns "role:text" of message entries on the branch to leaf.
func (h *harness) branchTexts(path, leaf string) []string {
	h.t.Helper()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		h.t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Tree().Branch(leaf)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range b {
		if e.Type == session.TypeMessage && e.Message != nil {
			out = append(out, string(e.Message.Role)+":"+e.Message.Text())
		}
	}
	return out
}

func userTexts(es []session.Entry) []string {
	var out []string
	for _, e := range es {
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser {
			out = append(out, e.Message.Text())
		}
	}
	return out
}

// gate is a tool that blocks until released, recording calls.
type gate struct {
	mu      sync.Mutex
	started chan string
	release chan struct{}
	calls   []string
}

func newGate() *gate { return &gate{started: make(chan string, 16), release: make(chan struct{})} }

func (g *gate) tool(name string) *agenttest.Tool {
	return &agenttest.Tool{Name: name, Fn: func(ctx context.Context, id string, args json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		g.mu.Lock()
		g.calls = append(g.calls, id)
		g.mu.Unlock()
		g.started <- id
		select {
		case <-g.release:
			return agenttest.TextOutput("done " + id), nil
		case <-ctx.Done():
			return llm.ToolOutput{}, fmt.Errorf("Operation aborted")
		}
	}}
}

// lastRequestTexts returns the texts of the messages of the model's latest
// request.
func (h *harness) lastRequestTexts() []string {
	h.t.Helper()
	reqs := h.model.Requests()
	if len(reqs) == 0 {
		h.t.Fatal("the model got no request")
	}
	var texts []string
	for _, m := range reqs[len(reqs)-1].Messages {
		texts = append(texts, m.Text())
	}
	return texts
}
