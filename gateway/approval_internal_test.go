package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/chat"
)

// These tests run approvals on their own, with no gateway: what they need
// comes through fakes of approvalHost and approvalRun.

// fakeHost records messages; its clock fires when the test says.
type fakeHost struct {
	mu     sync.Mutex
	sent   []chat.Out
	edits  []string
	owners map[string]bool
	fire   chan time.Time
}

func (f *fakeHost) send(_ context.Context, conv chat.ConvRef, out chat.Out) (chat.MsgRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent = append(f.sent, out)
	return chat.MsgRef{Conv: conv, ID: "m1"}, nil
}

func (f *fakeHost) editLater(_ chat.MsgRef, out chat.Out) {
	f.mu.Lock()
	f.edits = append(f.edits, out.Markdown)
	f.mu.Unlock()
}

func (f *fakeHost) isOwner(_ chat.Platform, user string) bool { return f.owners[user] }

func (f *fakeHost) timer(time.Duration) (<-chan time.Time, func() bool) {
	return f.fire, func() bool { return true }
}

// buttons returns the button ids of the latest approval message.
func (f *fakeHost) buttons() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sent) == 0 {
		return nil
	}
	var ids []string
	for _, b := range f.sent[len(f.sent)-1].Buttons[0] {
		ids = append(ids, b.ID)
	}
	return ids
}

// fakeRun is the run and location a call waits in.
type fakeRun struct {
	mu       sync.Mutex
	who      string
	records  []approval
	grants   map[string]bool
	statuses []string
	cuts     int // replies cut before a card
}

func (f *fakeRun) record(ap *approval) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, approval{State: ap.State, By: ap.By, Scope: ap.Scope, Tool: ap.Tool})
	return nil
}
func (f *fakeRun) granted(key string) bool { f.mu.Lock(); defer f.mu.Unlock(); return f.grants[key] }
func (f *fakeRun) grant(key string)        { f.mu.Lock(); f.grants[key] = true; f.mu.Unlock() }
func (f *fakeRun) requester() string       { return f.who }
func (f *fakeRun) status(text string) {
	f.mu.Lock()
	f.statuses = append(f.statuses, text)
	f.mu.Unlock()
}
func (f *fakeRun) frozen() bool { return false }
func (f *fakeRun) dir() string  { return "" }
func (f *fakeRun) cut(context.Context) error {
	f.mu.Lock()
	f.cuts++
	f.mu.Unlock()
	return nil
}

var testGroup = chat.ConvRef{Platform: "test", Channel: "group"}

// newTestApprovals asks for every bash call in groups; a call of "cat"
// touches a path outside the workspace.
func newTestApprovals() (*approvals, *fakeHost, *fakeRun) {
	host := &fakeHost{owners: map[string]bool{"owner": true}, fire: make(chan time.Time, 1)}
	run := &fakeRun{who: "alice", grants: map[string]bool{}}
	a := newApprovals(approvalDeps{
		policy: approvalPolicy{
			group: map[string]string{"bash": "ask"},
			toolPaths: func(_, tool string, _ json.RawMessage) ([]ToolPath, error) {
				if tool == "cat" {
					return []ToolPath{{Path: "/etc/passwd"}}, nil
				}
				return nil, nil
			},
			workspace: "/ws",
			timeout:   time.Minute,
		},
		host:     host,
		existing: func(context.Context, chat.Inbound) (*owner, *location) { return nil, nil },
	})
	return a, host, run
}

// ask starts tool's call the way the agent hook does and returns its
// decision once taken.
func ask(t *testing.T, a *approvals, host *fakeHost, run *fakeRun, tool string) (<-chan agent.Decision, []string) {
	t.Helper()
	done := make(chan agent.Decision, 1)
	go func() {
		done <- a.check(context.Background(), run, "s.jsonl", testGroup, agent.ToolCall{ID: "c1", Name: tool, Args: json.RawMessage(`{"command":"ls"}`)})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(host.buttons()) == 0 || !a.pendingFor("s.jsonl") {
		if time.Now().After(deadline) {
			t.Fatal("no approval message")
		}
		time.Sleep(time.Millisecond)
	}
	return done, host.buttons()
}

func press(user string) chat.Inbound {
	return chat.Inbound{Kind: chat.KindAction, Conv: testGroup, User: chat.User{ID: user, Name: user}}
}

// decideButton presses button id (ap:<id>:<decision>) as user.
func decideButton(a *approvals, user, button string) string {
	id, d, _ := strings.Cut(strings.TrimPrefix(button, btnApprove), ":")
	toast, then := a.decide(context.Background(), press(user), id, d)
	if then != nil {
		then()
	}
	return toast
}

// No answer in time is a denial, taken when the clock fires, recorded and
// shown on the approval message.
func TestApprovalTimeoutIsADenial(t *testing.T) {
	a, host, run := newTestApprovals()
	done, _ := ask(t, a, host, run, "bash")
	host.fire <- time.Now()
	d := <-done
	if !d.Block || d.Reason != "No one approved this tool call in time; it was denied." {
		t.Fatalf("decision = %+v", d)
	}
	if a.pendingFor("s.jsonl") {
		t.Error("still pending after the timeout")
	}
	if len(run.records) != 2 || run.records[1].State != "denied" || run.records[1].By != "timeout" {
		t.Errorf("records = %+v, want pending then denied by timeout", run.records)
	}
	if len(host.edits) != 1 || host.edits[0] != "⌛ `bash` was denied: no answer in time." {
		t.Errorf("edits = %q", host.edits)
	}
	if n := len(run.statuses); n != 2 || run.statuses[n-1] != "" {
		t.Errorf("statuses = %q, want set then cleared", run.statuses)
	}
}

// Who may take which decision, and what each decision does.
func TestApprovalDecisions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tool      string // cat reaches outside the workspace
		presses   [][2]string
		toasts    []string
		block     bool
		granted   string // a grant the decision leaves, "" for none
		decision  string // text of the edited approval message
		lastState string
	}{
		{name: "a bystander cannot decide, the requester allows once", tool: "bash",
			presses:  [][2]string{{"mallory", decideOnce}, {"alice", decideOnce}},
			toasts:   []string{"Only the person who asked, or an owner, can decide.", "Allowed."},
			decision: "✅ `bash` allowed once by alice.", lastState: "allowed"},
		{name: "allow for this session grants the requester", tool: "bash",
			presses: [][2]string{{"alice", decideSession}}, toasts: []string{"Allowed."},
			granted:  allowKey("alice", "bash", false),
			decision: "✅ `bash` allowed for this session by alice, for the calls of the person who asked.", lastState: "allowed"},
		{name: "an owner denies", tool: "bash",
			presses: [][2]string{{"owner", decideDeny}}, toasts: []string{"Denied."}, block: true,
			decision: "❌ `bash` denied by owner.", lastState: "denied"},
		{name: "outside the workspace only an owner allows", tool: "cat",
			presses:  [][2]string{{"alice", decideOnce}, {"owner", decideOnce}},
			toasts:   []string{"Only an owner can allow access outside the workspace.", "Allowed."},
			decision: "✅ `cat` allowed once by owner.", lastState: "allowed"},
		{name: "outside the workspace the requester may deny", tool: "cat",
			presses: [][2]string{{"alice", decideDeny}}, toasts: []string{"Denied."}, block: true,
			decision: "❌ `cat` denied by alice.", lastState: "denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, host, run := newTestApprovals()
			done, ids := ask(t, a, host, run, tc.tool)
			for i, p := range tc.presses {
				button := map[string]string{decideOnce: ids[0], decideSession: ids[1], decideDeny: ids[2]}[p[1]]
				if got := decideButton(a, p[0], button); got != tc.toasts[i] {
					t.Errorf("press %d by %s: toast %q, want %q", i, p[0], got, tc.toasts[i])
				}
			}
			d := <-done
			if d.Block != tc.block {
				t.Errorf("decision = %+v, want block %v", d, tc.block)
			}
			if tc.granted != "" && !run.granted(tc.granted) || tc.granted == "" && len(run.grants) > 0 {
				t.Errorf("grants = %v, want %q", run.grants, tc.granted)
			}
			if len(host.edits) != 1 || host.edits[0] != tc.decision {
				t.Errorf("edits = %q, want %q", host.edits, tc.decision)
			}
			if last := run.records[len(run.records)-1]; last.State != tc.lastState {
				t.Errorf("last record %+v, want state %s", last, tc.lastState)
			}
			// A second press finds nothing to decide.
			if got := decideButton(a, "owner", ids[0]); got != "This approval is no longer pending." {
				t.Errorf("second press: %q", got)
			}
		})
	}
}

// MCP tools (SERVER__tool) ask in groups unless agent.approvals says
// otherwise, by tool, by server (SERVER__*) or for every tool (*).
func TestApprovalPolicyMCP(t *testing.T) {
	dm := chat.ConvRef{Platform: "test", Channel: "dm", DM: true}
	tests := []struct {
		name      string
		dm, group map[string]string
		conv      chat.ConvRef
		tool      string
		want      string
	}{
		{"group default asks", nil, map[string]string{"bash": "ask"}, testGroup, "gh__create_issue", "ask"},
		{"dm default allows", nil, nil, dm, "gh__create_issue", "allow"},
		{"tool entry", nil, map[string]string{"gh__search": "allow"}, testGroup, "gh__search", "allow"},
		{"server entry", nil, map[string]string{"gh__*": "deny"}, testGroup, "gh__create_issue", "deny"},
		{"tool beats server", nil, map[string]string{"gh__*": "deny", "gh__search": "allow"}, testGroup, "gh__search", "allow"},
		{"other server's entry", nil, map[string]string{"fs__*": "allow"}, testGroup, "gh__search", "ask"},
		{"star", nil, map[string]string{"*": "allow"}, testGroup, "gh__search", "allow"},
		{"dm server entry", map[string]string{"gh__*": "ask"}, nil, dm, "gh__search", "ask"},
		{"own tools unchanged", nil, map[string]string{}, testGroup, "read", "allow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newApprovals(approvalDeps{policy: approvalPolicy{dm: tt.dm, group: tt.group}})
			if got := a.policy(tt.conv, tt.tool); got != tt.want {
				t.Errorf("policy(%s) = %s, want %s", tt.tool, got, tt.want)
			}
		})
	}
}

// In a group, a call of an MCP tool without a policy entry waits for a
// button like bash does, and runs once allowed.
func TestApprovalAskedForMCPToolInGroup(t *testing.T) {
	a, host, run := newTestApprovals()
	done, buttons := ask(t, a, host, run, "github__create_issue")
	if len(buttons) == 0 {
		t.Fatal("no buttons")
	}
	if toast := decideButton(a, "alice", buttons[0]); toast == "" {
		t.Fatal("no toast")
	}
	if d := <-done; d.Block {
		t.Fatalf("decision = %+v, want allowed", d)
	}
}
