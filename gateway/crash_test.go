package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

// The tests here crash a gateway the way kill -9 does: they copy its data
// directory while it works (what write(2) put in the files survives a
// process crash; what the process still buffered does not) and start a
// new gateway on the copy.

// withDir runs the harness in dir (a crash copy) instead of a new one.
func withDir(dir string) option { return func(h *harness) { h.dir = dir } }

// fastDrain lets a stop interrupt runs at once.
func fastDrain(c *gateway.Config) { c.DrainTimeout = 100 * time.Millisecond }

// crashCopy copies the files of dir as they are now into a new directory.
func crashCopy(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed meanwhile (a temporary file)
			}
			return err
		}
		// The index names files by absolute path.
		b = bytes.ReplaceAll(b, []byte(dir), []byte(dst))
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatalf("crash copy: %v", err)
	}
	return dst
}

// countIn counts the messages of the conversation containing sub.
func (h *harness) countIn(sub string) int {
	n := 0
	for _, m := range h.ad.Messages(dmConv) {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// dropLines rewrites a file without the lines containing any of subs.
func dropLines(t *testing.T, path string, subs ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for line := range strings.SplitSeq(string(b), "\n") {
		drop := false
		for _, s := range subs {
			drop = drop || strings.Contains(line, s)
		}
		if !drop {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStoredAnswerReachesTheChatAfterACrash: the answer is in the session
// but no delivery is recorded, no message of its reply is journaled and
// the message is still in the inbox (a crash before the reply's first
// post). The restart sends that answer once, without asking the model
// again, and records its delivery; a further restart sends nothing more.
// (The copy already in the chat stands for a post whose journal write the
// crash took: the one moment where a second copy is unavoidable.)
func TestStoredAnswerReachesTheChatAfterACrash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []faux.Turn{faux.Text("forty-two")})
	h.send("the question")
	h.waitText(dmConv, "forty-two")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	h.stop()
	// The crash window: the delivery record, the acknowledgement and the
	// clean stop never reached the disk.
	dropLines(t, h.sessions()[0], `"pibot.delivery"`, `"pibot.reply"`)
	dropLines(t, filepath.Join(h.dir, "inbox.jsonl"), `"op":"ack"`, `"op":"clean"`)
	calls := h.model.Calls()
	h.start()
	h.waitFor("the stored answer in the chat", func() bool { return h.countIn("forty-two") == 2 })
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	if n := h.model.Calls(); n != calls {
		t.Fatalf("the model was asked %d more times; the stored answer is enough", n-calls)
	}
	if n := len(deliveries(h)); n != 1 {
		t.Fatalf("%d delivery records, want 1", n)
	}
	h.restart()
	time.Sleep(300 * time.Millisecond)
	if n := h.countIn("forty-two"); n != 2 {
		t.Fatalf("the answer is in the chat %d times after another restart, want 2 (original + the one sent after the crash)", n)
	}
}

// interrupted is what a reply cut off by a crash says after the restart.
const interrupted = "interrupted because pibot restarted"

// replyStates lists the states of the pibot.reply entries (the reply
// journal) of every session, in file order.
func replyStates(h *harness) []string {
	var out []string
	for _, p := range h.sessions() {
		for _, e := range h.entries(p) {
			if e.CustomType == "pibot.reply" {
				var r struct{ State string }
				_ = json.Unmarshal(e.Data, &r)
				out = append(out, r.State)
			}
		}
	}
	return out
}

// TestDeliveredAnswerIsNotTouchedAfterACrash: the delivery is recorded but
// the inbox still names the run (a crash just after the record). The reply
// journal's entry in the session is closed by the delivery: the restart
// neither marks the delivered reply interrupted nor sends it again.
func TestDeliveredAnswerIsNotTouchedAfterACrash(t *testing.T) {
	t.Parallel()
	// Streamed slowly enough that its message is posted (and journaled)
	// before the run ends.
	long := strings.Repeat("word ", 30) + "forty-two"
	h := newHarness(t, []faux.Turn{faux.Text(long).WithDelay(10 * time.Millisecond)})
	h.send("the question")
	h.waitText(dmConv, "forty-two")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	if ds := deliveries(h); len(ds) != 1 {
		t.Fatalf("%d deliveries", len(ds))
	}
	if st := replyStates(h); !slices.Equal(st, []string{"streaming"}) {
		t.Fatalf("reply journal %q, want one streaming entry (closed by the delivery)", st)
	}
	h.stop()
	dropLines(t, filepath.Join(h.dir, "inbox.jsonl"), `"op":"ack"`, `"op":"clean"`)
	h.start()
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	time.Sleep(300 * time.Millisecond)
	if n := h.countIn("forty-two"); n != 1 {
		t.Fatalf("the delivered answer is in the chat %d times, want 1; messages: %q", n, h.ad.Messages(dmConv))
	}
	if n := h.countIn("interrupted"); n != 0 {
		t.Fatalf("the delivered answer was marked interrupted: %q", h.ad.Messages(dmConv))
	}
}

// TestDeliveredFollowUpRunIsNotSentAgainAfterACrash: a run took a second
// message as a follow-up and delivered one reply for both; pibot dies
// before the inbox let go of them. The restart finds the delivery after the
// follow-up's answer and sends nothing again. (The old code looked for the
// first message's delivery only up to the next user message, the
// follow-up, and sent its answer a second time.)
func TestDeliveredFollowUpRunIsNotSentAgainAfterACrash(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []faux.Turn{
		faux.Text(strings.Repeat("word ", 30) + "first answer").WithDelay(10 * time.Millisecond),
		faux.Text("second answer"),
	}, withConfig(func(c *gateway.Config) { c.QueueMode = "followup" }))
	h.send("the first question")
	h.waitFor("the first answer to stream", func() bool { return h.model.Calls() == 1 })
	h.send("the second question")
	h.waitText(dmConv, "first answer", "second answer")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	if ds := deliveries(h); len(ds) != 1 {
		t.Fatalf("%d deliveries, want one reply for both messages", len(ds))
	}
	h.stop()
	dropLines(t, filepath.Join(h.dir, "inbox.jsonl"), `"op":"ack"`, `"op":"clean"`)
	h.start()
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	time.Sleep(300 * time.Millisecond)
	for _, a := range []string{"first answer", "second answer"} {
		if n := h.countIn(a); n != 1 {
			t.Fatalf("%q is in the chat %d times, want 1; messages: %q", a, n, h.ad.Messages(dmConv))
		}
	}
}

// TestReplyCutMidStreamIsMarkedAfterACrash: pibot dies while a reply
// streams. The reply journal entry in the session names its chat message:
// the restart marks that message interrupted, closes the entry, and the
// resumed run answers in a new message. A further restart marks nothing
// again. (The crash is a stop whose last records are dropped: the drained
// run's own note and the inbox's acknowledgements.)
func TestReplyCutMidStreamIsMarkedAfterACrash(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 200) + "END"
	h := newHarness(t, []faux.Turn{faux.Text(long).WithDelay(20 * time.Millisecond), faux.Text("the full answer")}, withConfig(fastDrain))
	h.send("tell me a long story")
	h.waitFor("the reply journaled on disk", func() bool {
		s := h.sessions()
		if len(s) != 1 {
			return false
		}
		b, _ := os.ReadFile(s[0])
		return bytes.Contains(b, []byte(`"pibot.reply"`))
	})
	h.stop()
	if n := h.countIn("END"); n != 0 {
		t.Fatal("the reply finished before the stop; the test needs it cut off")
	}
	dropLines(t, h.sessions()[0], `"state":"noted"`)
	dropLines(t, filepath.Join(h.dir, "inbox.jsonl"), `"op":"ack"`, `"op":"clean"`)
	h.start()
	h.waitText(dmConv, "the full answer")
	h.waitFor("the cut reply marked", func() bool { return h.countIn(interrupted) == 1 })
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	if msgs := h.ad.Messages(dmConv); len(msgs) != 2 || !strings.Contains(msgs[0], interrupted) {
		t.Fatalf("chat %q, want the cut reply marked, then the answer", msgs)
	}
	if st := replyStates(h); !slices.Contains(st, "marked") {
		t.Fatalf("reply journal %q: the marked reply is not closed", st)
	}
	edits := len(h.ad.Calls())
	h.restart()
	time.Sleep(300 * time.Millisecond)
	for _, c := range h.ad.Calls()[edits:] {
		if c.Method == chattest.MethodEdit {
			t.Fatalf("a restart after recovery edited %+v again", c)
		}
	}
}

// TestLegacyRunJournalIsReadOnceAndRemoved: a data directory of an older
// pibot has runs.json, its reply journal. The first start marks the
// undelivered reply it names (not the delivered one) and removes it.
func TestLegacyRunJournalIsReadOnceAndRemoved(t *testing.T) {
	h := newHarness(t, []faux.Turn{faux.Text("forty-two")})
	in := h.send("the question")
	h.waitText(dmConv, "forty-two")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	ds := deliveries(h)
	if len(ds) != 1 {
		t.Fatalf("%d deliveries", len(ds))
	}
	cut, err := h.ad.Send(t.Context(), dmConv, chat.Out{Markdown: "half a reply"})
	if err != nil {
		t.Fatal(err)
	}
	h.stop()
	path := h.sessions()[0]
	journal := map[string]any{path + "|" + in.Conv.Key(): map[string]any{
		"path": path, "loc": in.Conv.Key(), "conv": in.Conv, "refs": []chat.MsgRef{ds[0], cut},
	}}
	b, _ := json.Marshal(journal)
	runs := filepath.Join(h.dir, "runs.json")
	if err := os.WriteFile(runs, b, 0o600); err != nil {
		t.Fatal(err)
	}
	h.start()
	h.waitFor("the cut reply marked", func() bool { return h.countIn(interrupted) == 1 })
	h.waitFor("runs.json removed", func() bool { _, err := os.Stat(runs); return os.IsNotExist(err) })
	if n := h.countIn("forty-two"); n != 1 {
		t.Fatalf("the delivered answer is in the chat %d times, want 1; messages: %q", n, h.ad.Messages(dmConv))
	}
	if n := h.countIn("half a reply"); n != 0 {
		t.Fatalf("the cut reply was not marked: %q", h.ad.Messages(dmConv))
	}
}

// TestToolNotRunTwiceAfterACrashInANewConversation: pibot crashes while
// the first tool of a new conversation runs (its call is on disk). The
// restart finds the conversation's session (its binding is on disk too),
// resumes it with "outcome unknown", and the model, seeing that, does not
// call the tool again. On the old code the restart opened a second session,
// the model saw the question afresh and the tool ran twice.
func TestToolNotRunTwiceAfterACrashInANewConversation(t *testing.T) {
	var runs atomic.Int32
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	tool := &agenttest.Tool{Name: "launch", Fn: func(ctx context.Context, id string, _ json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return agenttest.TextOutput("launched"), nil
	}}
	// A model that calls the tool for a fresh question and stops once it
	// sees a result for the call.
	model := faux.Turn{Reply: func(req llm.Request) faux.Turn {
		for _, m := range req.Messages {
			if m.Role == llm.RoleToolResult {
				return faux.Text("not launching again: " + m.Text())
			}
		}
		return faux.ToolCalls(faux.Call("c1", "launch", `{}`))
	}}
	h := newHarness(t, []faux.Turn{model}, withTools(tool), withConfig(fastDrain))
	h.send("launch the rocket")
	<-started
	dir := crashCopy(t, h.dir)
	close(release)

	h2 := newHarness(t, []faux.Turn{model}, withTools(tool), withDir(dir), withConfig(fastDrain))
	h2.waitText(dmConv, "not launching again", "outcome is unknown")
	// The user is told too, by pibot itself, whatever the model says.
	h2.waitText(dmConv, "interrupted while `launch` was running", "do not run it again")
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	if s := h2.sessions(); len(s) != 1 {
		t.Fatalf("%d session files after the restart, want 1: %q", len(s), s)
	}
}

// TestMessageThatCrashesTwiceIsQuarantined: a message in flight during two
// crashes in a row is set aside with a notice instead of being replayed
// again; a message in flight only during the first crash is answered.
func TestMessageThatCrashesTwiceIsQuarantined(t *testing.T) {
	t.Parallel()
	// "bomb" never finishes (it stands for a message that takes pibot
	// down); "innocent" takes a moment.
	model := faux.Turn{Reply: func(req llm.Request) faux.Turn {
		last := req.Messages[len(req.Messages)-1].Text()
		if strings.Contains(last, "bomb") {
			return faux.Text("boom").WithDelay(time.Hour)
		}
		return faux.Text("fine, thanks").WithDelay(100 * time.Millisecond)
	}}
	h1 := newHarness(t, []faux.Turn{model}, withConfig(fastDrain))
	h1.send("bomb")
	h1.send("innocent", inConv(groupConv), from("owner"), mentioned())
	h1.waitFor("both runs to start", func() bool { return h1.model.Calls() == 2 })
	crash1 := crashCopy(t, h1.dir)

	h2 := newHarness(t, []faux.Turn{model}, withDir(crash1), withConfig(fastDrain))
	h2.waitText(groupConv, "fine, thanks")
	h2.waitFor("only the bomb left in the inbox", func() bool { return h2.inbox.Len() == 1 })
	h2.waitFor("the bomb replayed", func() bool { return h2.model.Calls() >= 2 })
	// The inbox forgets an item before its ack reaches the file (the write
	// may wait behind an fsync): a crash copied in between would count a
	// second crash for the innocent one too. A throwaway copy is checked,
	// as opening an inbox counts the crashes of what it replays.
	h2.waitFor("the innocent one's ack in the inbox file", func() bool { return pendingOnDisk(t, crashCopy(t, h2.dir)) == 1 })
	crash2 := crashCopy(t, h2.dir)

	h3 := newHarness(t, []faux.Turn{model}, withDir(crash2), withConfig(fastDrain))
	h3.waitText(dmConv, "stopped pibot twice (a crash or a stall) before it was answered, so it was set aside")
	h3.waitFor("an empty inbox", func() bool { return h3.inbox.Len() == 0 })
	if q, err := h3.inbox.Quarantined(t.Context()); err != nil || len(q) != 1 || !strings.Contains(string(q[0].Data), "bomb") {
		t.Fatalf("quarantined = %+v, want the bomb", q)
	}
	time.Sleep(200 * time.Millisecond)
	if n := h3.model.Calls(); n != 0 {
		t.Fatalf("the model was asked %d times after the quarantine", n)
	}
	if msgs := h3.ad.Messages(groupConv); len(msgs) != 0 {
		t.Fatalf("the innocent message was handled again: %q", msgs)
	}
	// A restart does not bring it back.
	h3.restart()
	time.Sleep(200 * time.Millisecond)
	if n := h3.model.Calls(); n != 0 || h3.inbox.Len() != 0 {
		t.Fatalf("after a restart: %d model calls, %d pending", n, h3.inbox.Len())
	}
}
