package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// inbound builds a user message as h.send does, without injecting it.
func (h *harness) inbound(text string, opts ...msgOpt) chat.Inbound {
	n := h.seq.Add(1)
	in := chat.Inbound{Kind: chat.KindMessage, Conv: dmConv, Msg: chat.MsgRef{Conv: dmConv, ID: fmt.Sprintf("u%d", n)}, User: chat.User{ID: "owner", Name: "Owner"}, Text: text, Time: time.Now()}
	for _, o := range opts {
		o(&in)
	}
	in.Msg.Conv = in.Conv
	in.Command = chat.ParseCommand(text, "")
	return in
}

// poll delivers events one at a time, each after the sink returned for the
// one before, as Telegram's long polling does. It returns at once; the
// returned channel is closed when every event was delivered.
func (h *harness) poll(ins ...chat.Inbound) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, in := range ins {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := h.ad.Inject(ctx, in)
			cancel()
			if err != nil {
				h.t.Errorf("inject %q: %v", in.Text, err)
				return
			}
		}
	}()
	return done
}

// heldModel holds every request that is not a chat turn (a compaction's
// summary request) until release is closed; it reports the first on
// holding.
type heldModel struct {
	llm.Model
	holding chan struct{}
	release chan struct{}
	once    sync.Once
}

func (m *heldModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	if req.SystemPrompt == compaction.SystemPrompt {
		m.once.Do(func() { close(m.holding) })
		select {
		case <-m.release:
		case <-ctx.Done():
		}
	}
	return m.Model.Stream(ctx, req)
}

// TestSlowCompactDoesNotStallOtherChats replays the stall of a /compact
// that waits for the model: the platform delivers one event at a time,
// and another conversation's message and command that arrive behind it
// are still answered while the compaction waits.
func TestSlowCompactDoesNotStallOtherChats(t *testing.T) {
	held := &heldModel{holding: make(chan struct{}), release: make(chan struct{})}
	// Each request is answered by what it asks: the compaction may ask
	// twice, concurrently with the other chat.
	answers := map[string]string{"first": "one", "second": "two", "hi": "hello other"}
	turn := faux.Turn{Reply: func(req llm.Request) faux.Turn {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser {
			if a, ok := answers[last.Text()]; ok {
				return faux.Text(a)
			}
		}
		return faux.Text("the summary")
	}}
	h := newHarness(t, slices.Repeat([]faux.Turn{turn}, 8),
		withModel(func(m llm.Model) llm.Model { held.Model = m; return held }),
		withConfig(func(c *gateway.Config) {
			c.Compaction = compaction.Settings{ReserveTokens: 1000, KeepRecentTokens: 1}
		}))
	release := held.release
	summarizing := held.holding
	var once atomic.Bool
	stop := func() {
		if once.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(stop) // before the harness stops: its drain waits for the compaction
	h.send("first")
	h.waitText(dmConv, "one")
	h.send("second")
	h.waitText(dmConv, "two")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })

	other := chat.ConvRef{Platform: "test", Channel: "dm2", DM: true}
	polled := h.poll(h.inbound("/compact"), h.inbound("hi", inConv(other)), h.inbound("/status", inConv(other)))
	select {
	case <-summarizing:
	case <-time.After(15 * time.Second):
		t.Fatal("the compaction never asked the model")
	}
	// The compaction waits for the model; the other chat is answered.
	h.waitText(other, "hello other")
	h.waitText(other, "**Session**")
	if slices.ContainsFunc(h.ad.Messages(dmConv), func(m string) bool { return strings.Contains(m, "Compacted") }) {
		t.Fatal("the compaction finished before the model answered")
	}
	stop()
	h.waitText(dmConv, "🗜 Compacted.")
	<-polled
}

// TestCommandsAndMessagesRunInOrder: commands and messages of one location
// are executed in the order they arrived, though commands wait in the
// location's mailbox like messages: the mode set first applies to the
// messages after it, and a listing sent after them sees them.
func TestCommandsAndMessagesRunInOrder(t *testing.T) {
	h := newHarness(t, nil, withConfig(func(c *gateway.Config) { c.CollectDebounce = time.Minute }))
	<-h.poll(h.inbound("/queue collect"), h.inbound("alpha"), h.inbound("beta"), h.inbound("/queue list"), h.inbound("/queue drop"), h.inbound("/queue list"))
	h.waitText(dmConv, "Queue mode set to **collect**.")
	h.waitText(dmConv, "Queued:", "collect: alpha", "collect: beta")
	h.waitText(dmConv, "Dropped 2 queued messages.")
	h.waitText(dmConv, "Queue mode: **collect**. Nothing queued.")
	var order []string
	for _, m := range h.ad.Messages(dmConv) {
		for _, want := range []string{"Queue mode set", "collect: alpha", "Dropped 2", "Nothing queued"} {
			if strings.Contains(m, want) {
				order = append(order, want)
			}
		}
	}
	if want := []string{"Queue mode set", "collect: alpha", "Dropped 2", "Nothing queued"}; !slices.Equal(order, want) {
		t.Fatalf("answers in order %q, want %q", order, want)
	}
	if reqs := h.model.Requests(); len(reqs) != 0 {
		t.Fatalf("the model was asked %d times; the dropped messages ran", len(reqs))
	}
}

// TestPressToastComesBeforeItsWork: a button press is answered (the
// toast, through its interaction) before the work it starts is done: the
// approved tool is still running, and the approval message is edited
// after the toast.
func TestPressToastComesBeforeItsWork(t *testing.T) {
	g := newGate()
	h := newHarness(t, []faux.Turn{faux.ToolCalls(faux.Call("c1", "slow", `{}`)), faux.Text("done")},
		withTools(g.tool("slow")),
		withConfig(func(c *gateway.Config) { c.DMApprovals = map[string]string{"slow": "ask"} }))
	h.send("go")
	ids := h.approvalButtons(dmConv)
	h.press(dmConv, "owner", ids[0])
	select {
	case <-g.started:
	case <-time.After(15 * time.Second):
		t.Fatal("the approved tool never started")
	}
	toast := -1
	calls := h.ad.Calls()
	for i, c := range calls {
		if c.Method == chattest.MethodRespond && c.Text == "Allowed." {
			toast = i
		}
	}
	if toast < 0 {
		t.Fatal("the press was not answered while the approved tool runs")
	}
	close(g.release)
	h.waitText(dmConv, "done")
	h.waitText(dmConv, "allowed once by")
	for i, c := range h.ad.Calls() {
		if c.Method == chattest.MethodEdit && strings.Contains(c.Text, "allowed once by") && i < toast {
			t.Fatalf("the approval message was edited (call %d) before the toast (call %d)", i, toast)
		}
	}
}

// TestReplayedCommandsRunInOrder replays commands left in the inbox by a
// crash: a /compact whose compaction entry was written before the crash
// answers again without asking the model a second time, and a command
// that had not run yet runs, after it.
func TestReplayedCommandsRunInOrder(t *testing.T) {
	answers := map[string]string{"first": "one", "second": "two"}
	turn := faux.Turn{Reply: func(req llm.Request) faux.Turn {
		if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser {
			if a, ok := answers[last.Text()]; ok {
				return faux.Text(a)
			}
		}
		return faux.Text("the summary")
	}}
	h := newHarness(t, slices.Repeat([]faux.Turn{turn}, 8), withConfig(func(c *gateway.Config) {
		c.Compaction = compaction.Settings{ReserveTokens: 1000, KeepRecentTokens: 1}
	}))
	h.send("first")
	h.waitText(dmConv, "one")
	h.send("second")
	h.waitText(dmConv, "two")
	h.waitFor("the run to end", func() bool { return len(pendingOf(h)) == 0 })
	h.send("/compact")
	h.waitText(dmConv, "🗜 Compacted.")
	asked := h.model.Calls()
	h.stop()

	// What a crash after the compaction and before its ack leaves, and a
	// command accepted behind it.
	inbox, err := cluster.OpenInbox(filepath.Join(h.dir, "inbox.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"/compact", "/thinking high"} {
		data, err := json.Marshal(struct {
			Kind string       `json:"kind"`
			In   chat.Inbound `json:"in"`
		}{"command", h.inbound(text)})
		if err != nil {
			t.Fatal(err)
		}
		_, durable, err := inbox.Enqueue(context.Background(), dmConv.Key(), data)
		if err == nil {
			err = durable()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	inbox.Close()
	h.start()
	h.waitText(dmConv, "Thinking set to **high**.")
	h.waitFor("the replayed commands to be acknowledged", func() bool { return len(pendingOf(h)) == 0 })
	var order []string
	for _, m := range h.ad.Messages(dmConv) {
		if strings.Contains(m, "Compacted") || strings.Contains(m, "Thinking set") {
			order = append(order, m)
		}
	}
	if want := []string{"🗜 Compacted.", "🗜 Compacted.", "Thinking set to **high**."}; !slices.Equal(order, want) {
		t.Fatalf("answers %q, want %q", order, want)
	}
	if n := h.model.Calls(); n != asked {
		t.Fatalf("the replayed /compact asked the model again (%d calls, %d before)", n, asked)
	}
}

// TestSenderBudgetCountsCommands: a command counts against its sender's
// budget at intake, as a message does, though it is executed later by the
// location's mailbox.
func TestSenderBudgetCountsCommands(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("ok")}, withBudget(cluster.NewBudget(0.001, 2)))
	stranger := chat.ConvRef{Platform: "test", Channel: "dm-ann", DM: true}
	cli, err := access.OpenStore(filepath.Join(h.dir, "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	h.send("hi", inConv(stranger), from("ann"))
	h.waitText(stranger, "pairing code")
	reqs, _, _ := cli.List(t.Context())
	if _, err := cli.Approve(t.Context(), "test", reqs[0].Code); err != nil {
		t.Fatal(err)
	}
	h.send("/queue followup", inConv(stranger), from("ann"))
	h.send("/queue collect", inConv(stranger), from("ann"))
	h.send("/queue interrupt", inConv(stranger), from("ann"))
	h.waitText(stranger, "faster than I can take them")
	h.waitText(stranger, "Queue mode set to **collect**.")
	h.waitFor("the commands within the budget to be done", func() bool { return len(pendingOf(h)) == 0 })
	if slices.ContainsFunc(h.ad.Messages(stranger), func(m string) bool { return strings.Contains(m, "**interrupt**") }) {
		t.Fatal("a command over the sender's budget was executed")
	}
}
