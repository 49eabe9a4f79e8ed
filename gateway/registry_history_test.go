package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
)

// historyAdapter is the chattest adapter plus chat.HistoryUser: it keeps
// the History the gateway hands it.
type historyAdapter struct {
	*chattest.Adapter
	mu sync.Mutex
	h  chat.History
}

func (a *historyAdapter) UseHistory(h chat.History) {
	a.mu.Lock()
	a.h = h
	a.mu.Unlock()
}

func (a *historyAdapter) history() chat.History {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.h
}

var _ chat.HistoryUser = (*historyAdapter)(nil)

func transcriptLines(t *testing.T, h chat.History, conv chat.ConvRef) ([]string, chat.Transcript) {
	t.Helper()
	tr, err := h.Transcript(context.Background(), conv)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range tr.Messages {
		who := "user"
		if m.FromBot {
			who = "bot"
		}
		out = append(out, fmt.Sprintf("%s|%s:%s", m.Thread, who, m.Text))
	}
	return out, tr
}

func TestHistoryRebuildsMainLineThreadsAndBranches(t *testing.T) {
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("A1"), faux.Text("A2"), faux.Text("T1"), faux.Text("A3")},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }))
	hist := ha.history()
	if hist == nil {
		t.Fatal("the gateway handed the adapter no history")
	}
	q1 := h.send("q1")
	h.waitText(dmConv, "A1")
	q2 := h.send("q2")
	h.waitText(dmConv, "A2")
	h.waitFor("two runs", func() bool { return len(deliveries(h)) == 2 && h.inbox.Len() == 0 })
	a1 := deliveries(h)[0]

	thread := dmConv
	thread.Thread = q1.Msg.ID
	h.send("why is the sky blue?", inConv(thread))
	h.waitText(thread, "T1")
	h.waitFor("thread run", func() bool { return len(deliveries(h)) == 3 && h.inbox.Len() == 0 })

	lines, tr := transcriptLines(t, hist, dmConv)
	want := []string{"|user:q1", "|bot:A1", "|user:q2", "|bot:A2", q1.Msg.ID + "|user:why is the sky blue?", q1.Msg.ID + "|bot:T1"}
	if !slices.Equal(lines, want) {
		t.Fatalf("transcript = %q\nwant %q", lines, want)
	}
	if tr.Messages[0].ID != q1.Msg.ID || tr.Messages[1].ID != a1.ID {
		t.Errorf("message ids = %q, %q; want %q, %q", tr.Messages[0].ID, tr.Messages[1].ID, q1.Msg.ID, a1.ID)
	}
	if len(tr.Elsewhere) != 0 {
		t.Errorf("elsewhere before any branch move: %q", tr.Elsewhere)
	}
	if len(tr.Threads) != 1 || tr.Threads[0] != (chat.HistoryThread{ID: q1.Msg.ID, Root: q1.Msg.ID, Title: "why is the sky blue?"}) {
		t.Errorf("threads = %+v", tr.Threads)
	}

	// Replying to A1 branches there: the main line then shows what the
	// model sees, without q2 and A2.
	h.send("q3", replyTo(chat.MsgRef{Conv: dmConv, ID: a1.ID}))
	h.waitText(dmConv, "A3")
	h.waitFor("branch run", func() bool { return len(deliveries(h)) == 4 && h.inbox.Len() == 0 })
	lines, tr = transcriptLines(t, hist, dmConv)
	if want := []string{"|user:q1", "|bot:A1", "|user:q3", "|bot:A3"}; !slices.Equal(lines[:4], want) {
		t.Fatalf("after the branch: %q, want %q first", lines, want)
	}
	// What the branch move left is named, so a view can drop it.
	a2 := deliveries(h)[1]
	if want := []string{q2.Msg.ID, a2.ID}; !slices.Equal(tr.Elsewhere, slices.Sorted(slices.Values(want))) {
		t.Errorf("elsewhere = %q, want %q", tr.Elsewhere, want)
	}

	// After a restart the same history comes from the files alone.
	h.restart()
	after, _ := transcriptLines(t, ha.history(), dmConv)
	if !slices.Equal(after, lines) {
		t.Fatalf("after restart = %q, want %q", after, lines)
	}

	convs, err := ha.history().Conversations(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 || convs[0].Conv.Channel != dmConv.Channel || convs[0].Title != "q1" || convs[0].Messages != 4 {
		t.Fatalf("conversations = %+v", convs)
	}
}

// The History an adapter gets is bound to its platform: it does not read
// another platform's conversations.
func TestHistoryRefusesOtherPlatforms(t *testing.T) {
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("secret answer")},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }))
	h.send("secret question")
	h.waitText(dmConv, "secret answer")
	h.waitFor("run", func() bool { return len(deliveries(h)) == 1 && h.inbox.Len() == 0 })
	other := dmConv
	other.Platform = "web"
	tr, err := ha.history().Transcript(context.Background(), other)
	if err == nil || !strings.Contains(err.Error(), "not a test conversation") || len(tr.Messages) != 0 {
		t.Fatalf("Transcript of another platform = %+v, %v", tr, err)
	}
}

func TestHistoryConversationsNewestFirst(t *testing.T) {
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("one"), faux.Text("two")},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }))
	h.send("older chat")
	h.waitText(dmConv, "one")
	h.waitFor("first run", func() bool { return len(deliveries(h)) == 1 && h.inbox.Len() == 0 })
	dm2 := chat.ConvRef{Platform: "test", Channel: "dm2", DM: true}
	h.send("newer chat", inConv(dm2), from("owner"))
	h.waitText(dm2, "two")
	h.waitFor("second run", func() bool { return len(deliveries(h)) == 2 && h.inbox.Len() == 0 })

	titles := func(limit int) []string {
		t.Helper()
		convs, err := ha.history().Conversations(context.Background(), limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range convs {
			out = append(out, c.Conv.Channel+":"+c.Title)
		}
		return out
	}
	if got, want := titles(10), []string{"dm2:newer chat", "dm1:older chat"}; !slices.Equal(got, want) {
		t.Errorf("conversations = %q, want %q", got, want)
	}
	if got, want := titles(1), []string{"dm2:newer chat"}; !slices.Equal(got, want) {
		t.Errorf("conversations (limit 1) = %q, want %q", got, want)
	}
}

// History reads a session while its run writes it.
func TestHistoryDuringARun(t *testing.T) {
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("a slow answer with several words in it").WithDelay(5 * time.Millisecond)},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }))
	h.send("question")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			if _, err := ha.history().Transcript(context.Background(), dmConv); err != nil {
				t.Error(err)
				return
			}
			if _, err := ha.history().Conversations(context.Background(), 5); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	h.waitText(dmConv, "a slow answer")
	<-done
	h.waitFor("the answer in the history", func() bool {
		lines, _ := transcriptLines(t, ha.history(), dmConv)
		return slices.Equal(lines, []string{"|user:question", "|bot:a slow answer with several words in it"})
	})
}

// contextLines returns what the model sees at location loc, as
// transcriptLines shows a place of thread: "thread|user:text" for each
// user message and "thread|bot:text" for each run's answers (the texts of
// its assistant messages), a compaction's summary as "thread|note:…".
func contextLines(t *testing.T, h *harness, loc, thread string) []string {
	t.Helper()
	for _, path := range h.sessions() {
		s, err := session.OpenFile(path, session.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		head, ok := s.Tree().Head(loc)
		if !ok {
			s.Close()
			continue
		}
		c, err := s.Tree().Context(head)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := c.LLMMessages()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		bot := ""
		flush := func() {
			if bot != "" {
				out = append(out, thread+"|bot:"+bot)
			}
			bot = ""
		}
		for _, m := range msgs {
			switch m.Role {
			case llm.RoleUser:
				flush()
				out = append(out, thread+"|user:"+m.Text())
			case llm.RoleAssistant:
				if txt := strings.TrimSpace(m.Text()); txt != "" {
					if bot != "" {
						bot += "\n\n"
					}
					bot += txt
				}
			case llm.RoleCompactionSummary:
				flush()
				out = append(out, thread+"|note:"+m.Summary)
			}
		}
		flush()
		return out
	}
	t.Fatalf("no session holds %s", loc)
	return nil
}

// placeLines is transcriptLines of one place, notes shown by the summary
// they carry.
func placeLines(tr chat.Transcript, thread string) []string {
	var out []string
	for _, m := range tr.Messages {
		if m.Thread != thread {
			continue
		}
		who := "user"
		switch {
		case m.Note:
			who = "note"
			_, m.Text, _ = strings.Cut(m.Text, "\n\n")
		case m.FromBot:
			who = "bot"
		}
		out = append(out, m.Thread+"|"+who+":"+m.Text)
	}
	return out
}

// TestHistoryAfterAJumpOntoAThread: a /tree jump of the main line onto a
// thread's branch. Every place then shows exactly its context, live and
// after a restart: the main line the thread's messages (named as posted
// in the thread, so a reply to them lands there), the thread its own, and
// what the jump left is named for the view to drop.
func TestHistoryAfterAJumpOntoAThread(t *testing.T) {
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("A1"), faux.Text("A2"), faux.Text("T1")},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }))
	q1 := h.send("q1")
	h.waitText(dmConv, "A1")
	q2 := h.send("q2")
	h.waitText(dmConv, "A2")
	h.waitFor("two runs", func() bool { return len(deliveries(h)) == 2 && h.inbox.Len() == 0 })
	thread := dmConv
	thread.Thread = q1.Msg.ID
	why := h.send("why?", inConv(thread))
	h.waitText(thread, "T1")
	h.waitFor("thread run", func() bool { return len(deliveries(h)) == 3 && h.inbox.Len() == 0 })
	t1 := deliveries(h)[2]

	h.send("/tree")
	h.waitFor("the tree", func() bool { return len(treeCalls(h, dmConv)) == 1 })
	var jump string
	for _, b := range treeButtons(treeCalls(h, dmConv)[0]) {
		if b.Label == "why?" {
			jump = b.ID
		}
	}
	if jump == "" {
		t.Fatalf("/tree offers no jump to the thread's branch: %+v", treeCalls(h, dmConv)[0].Buttons)
	}
	h.press(dmConv, "owner", jump)
	h.waitText(dmConv, `Now on the branch at “why\?”`)

	check := func(when string, hist chat.History) {
		t.Helper()
		tr, err := hist.Transcript(context.Background(), dmConv)
		if err != nil {
			t.Fatal(err)
		}
		mainWant := contextLines(t, h, dmConv.Key(), "")
		if want := []string{"|user:q1", "|user:why?", "|bot:T1"}; !slices.Equal(mainWant, want) {
			t.Fatalf("%s: the main line's context is %q, want %q", when, mainWant, want)
		}
		if got := placeLines(tr, ""); !slices.Equal(got, mainWant) {
			t.Errorf("%s: main line shows %q, its context is %q", when, got, mainWant)
		}
		threadCtx := contextLines(t, h, thread.Key(), thread.Thread)
		// The thread shows its context after the message it hangs off.
		if got, want := placeLines(tr, thread.Thread), threadCtx[1:]; !slices.Equal(got, want) {
			t.Errorf("%s: thread shows %q, want %q (its context %q)", when, got, want, threadCtx)
		}
		type place struct {
			thread, id, origin string
			moved              bool
		}
		var got []place
		for _, m := range tr.Messages {
			got = append(got, place{m.Thread, m.ID, m.Origin, m.Moved})
		}
		// (A thread of this fake platform hangs off the message it is named
		// after: q1.)
		want := []place{{"", q1.Msg.ID, "", false},
			{"", why.Msg.ID, thread.Thread, true}, {"", t1.ID, thread.Thread, true},
			{thread.Thread, why.Msg.ID, thread.Thread, false}, {thread.Thread, t1.ID, thread.Thread, false}}
		if !slices.Equal(got, want) {
			t.Errorf("%s: places of the messages %+v, want %+v", when, got, want)
		}
		if len(tr.Threads) != 1 || tr.Threads[0].Root != q1.Msg.ID || tr.Threads[0].Title != "why?" {
			t.Errorf("%s: threads %+v", when, tr.Threads)
		}
		if want := slices.Sorted(slices.Values([]string{deliveries(h)[0].ID, q2.Msg.ID, deliveries(h)[1].ID})); !slices.Equal(tr.Elsewhere, want) {
			t.Errorf("%s: elsewhere %q, want %q", when, tr.Elsewhere, want)
		}
	}
	check("live", ha.history())
	h.restart()
	check("after a restart", ha.history())
}

// TestHistoryShowsACompactionAsTheModelSeesIt: after /compact the main
// line shows the summary as a note and then what the compaction kept,
// and names the summarised messages for the view to drop.
func TestHistoryShowsACompactionAsTheModelSeesIt(t *testing.T) {
	ha := &historyAdapter{}
	h := newHarness(t, []faux.Turn{faux.Text("one"), faux.Text("two"), faux.Text("the summary"), faux.Text("three")},
		withAdapter(func(a *chattest.Adapter) chat.Adapter { ha.Adapter = a; return ha }),
		withConfig(func(c *gateway.Config) {
			c.Compaction = compaction.Settings{ReserveTokens: 1000, KeepRecentTokens: 1}
		}))
	first := h.send("first")
	h.waitText(dmConv, "one")
	h.send("second")
	h.waitText(dmConv, "two")
	h.waitFor("the runs to end", func() bool { return len(deliveries(h)) == 2 && len(pendingOf(h)) == 0 })
	h.send("/compact")
	h.waitText(dmConv, "🗜 Compacted.")
	h.send("third")
	h.waitText(dmConv, "three")
	h.waitFor("the third run", func() bool { return len(deliveries(h)) == 3 && len(pendingOf(h)) == 0 })

	tr, err := ha.history().Transcript(context.Background(), dmConv)
	if err != nil {
		t.Fatal(err)
	}
	want := contextLines(t, h, dmConv.Key(), "")
	if len(want) == 0 || !strings.HasPrefix(want[0], "|note:") || slices.Contains(want, "|user:first") {
		t.Fatalf("the context after /compact is %q", want)
	}
	if got := placeLines(tr, ""); !slices.Equal(got, want) {
		t.Errorf("main line shows %q, its context is %q", got, want)
	}
	if m := tr.Messages[0]; !m.Note || m.ID != "" || !strings.Contains(m.Text, "compacted") {
		t.Errorf("the first message is %+v, want the compaction's note", m)
	}
	if !slices.Contains(tr.Elsewhere, first.Msg.ID) {
		t.Errorf("elsewhere %q lacks the summarised %q", tr.Elsewhere, first.Msg.ID)
	}
}
