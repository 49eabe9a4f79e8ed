package agent_test

import (
	"context"
	"iter"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/llm"
)

// sharedModel streams like the real providers' builder: one message,
// changed in place, is the Partial of every event. Each call streams a
// thinking block, then text in tokens; it keeps every request as given.
type sharedModel struct {
	tokens []string

	mu   sync.Mutex
	reqs []llm.Request
}

func (m *sharedModel) Info() llm.ModelInfo { return llm.ModelInfo{ID: "shared", Provider: "test"} }

func (m *sharedModel) Stream(_ context.Context, req llm.Request) iter.Seq[llm.Event] {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return func(yield func(llm.Event) bool) {
		msg := &llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{}, StopReason: llm.StopStop}
		if !yield(llm.Event{Type: llm.EventStart, Partial: msg}) {
			return
		}
		msg.Content = append(msg.Content, llm.Content{Type: llm.ContentThinking, Thinking: "hmm"})
		if !yield(llm.Event{Type: llm.EventThinkingStart, ContentIndex: 0, Partial: msg}) {
			return
		}
		msg.Content = append(msg.Content, llm.Content{Type: llm.ContentText})
		var text strings.Builder // grows as the real builder's text does
		for _, tok := range m.tokens {
			text.WriteString(tok)
			msg.Content[1].Text = text.String()
			if !yield(llm.Event{Type: llm.EventTextDelta, ContentIndex: 1, Delta: tok, Partial: msg}) {
				return
			}
		}
		final := *msg
		final.Content = append([]llm.Content(nil), msg.Content...)
		yield(llm.Event{Type: llm.EventDone, Reason: llm.StopStop, Message: &final})
	}
}

func (m *sharedModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs
}

// A message_update lends the run's live partial: during the call it is
// the message so far, and what the agent handed out for keeps (the
// message_start and message_end messages, Messages taken while the reply
// streams) never changes afterwards.
func TestUpdatesLendTheLivePartial(t *testing.T) {
	m := &sharedModel{tokens: []string{"one ", "two ", "three ", "four"}}
	a := agent.New(agent.Config{Model: m, Now: fixedNow}, nil)

	type taken struct {
		msgs  []llm.Message
		texts []string
	}
	var mu sync.Mutex
	var snaps []taken
	var kept []*llm.Message
	var want strings.Builder
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// Another goroutine reads the conversation while it streams.
		for {
			select {
			case <-stop:
				return
			default:
			}
			msgs := a.Messages()
			var texts []string
			for _, x := range msgs {
				texts = append(texts, x.Text())
			}
			mu.Lock()
			snaps = append(snaps, taken{msgs, texts})
			mu.Unlock()
		}
	})
	emit := func(e agent.Event) {
		switch e.Type {
		case agent.EventMessageStart, agent.EventMessageEnd:
			kept = append(kept, e.Message)
		case agent.EventMessageUpdate:
			want.WriteString(e.AssistantEvent.Delta)
			if got := e.Message.Text(); got != want.String() {
				t.Errorf("update %q: message text %q, want %q", e.AssistantEvent.Delta, got, want.String())
			}
			if e.AssistantEvent.Partial != e.Message {
				t.Error("the update's partial is not its message")
			}
			if th := e.Message.Content[0].Thinking; th != "hmm" {
				t.Errorf("thinking = %q", th)
			}
			// Let the reader take the conversation while this update
			// is the last message.
			mu.Lock()
			n0 := len(snaps)
			mu.Unlock()
			for n := n0; n <= n0+1; {
				runtime.Gosched()
				mu.Lock()
				n = len(snaps)
				mu.Unlock()
			}
		}
	}
	if err := a.Prompt(t.Context(), emit, user("count")); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()

	if len(kept) != 4 {
		t.Fatalf("kept %d messages, want 4", len(kept))
	}
	if got := kept[2].Text(); got != "" || len(kept[2].Content) != 0 {
		t.Errorf("message_start changed after it was emitted: %+v", kept[2])
	}
	if got := kept[3].Text(); got != "one two three four" {
		t.Errorf("message_end text = %q", got)
	}
	for _, s := range snaps {
		for i, x := range s.msgs {
			if x.Text() != s.texts[i] {
				t.Fatalf("a conversation taken while streaming changed: %q became %q", s.texts[i], x.Text())
			}
		}
	}
	if got := a.Messages()[1].Text(); got != "one two three four" {
		t.Errorf("answer = %q", got)
	}
}

// A request shares the conversation when nothing needs converting; the
// model's copy still never changes as the conversation goes on, and
// messages of coding-agent roles are still converted.
func TestRequestsStaySnapshots(t *testing.T) {
	m := &sharedModel{tokens: []string{"fine"}}
	excluded := true
	history := []llm.Message{
		user("first"),
		{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("ok")}, StopReason: llm.StopStop},
	}
	a := agent.New(agent.Config{Model: m, Now: fixedNow}, history)
	for _, text := range []string{"second", "third"} {
		if err := a.Prompt(t.Context(), nil, user(text)); err != nil {
			t.Fatal(err)
		}
	}
	reqs := m.requests()
	want := [][]string{{"first", "ok", "second"}, {"first", "ok", "second", "fine", "third"}}
	for i, r := range reqs {
		var got []string
		for _, x := range r.Messages {
			got = append(got, x.Text())
		}
		if strings.Join(got, "|") != strings.Join(want[i], "|") {
			t.Errorf("request %d = %q, want %q", i, got, want[i])
		}
	}

	// A bash execution becomes a user message; an excluded one is left out.
	a = agent.New(agent.Config{Model: m, Now: fixedNow}, []llm.Message{
		{Role: llm.RoleBashExecution, Command: "ls", Output: "a.txt", Timestamp: 1},
		{Role: llm.RoleBashExecution, Command: "rm", Output: "", Timestamp: 1, ExcludeFromContext: &excluded},
	})
	if err := a.Prompt(t.Context(), nil, user("and?")); err != nil {
		t.Fatal(err)
	}
	last := m.requests()[len(m.requests())-1].Messages
	if len(last) != 2 || last[0].Role != llm.RoleUser || !strings.Contains(last[0].Text(), "a.txt") {
		t.Errorf("converted request = %+v", last)
	}
}

// BenchmarkStreamedTokens streams a 256-token answer per op through the
// agent and reports the heap allocated per streamed token (the provider's
// own growing text included) with a listener that reads each update.
func BenchmarkStreamedTokens(b *testing.B) {
	tokens := make([]string, 256)
	for i := range tokens {
		tokens[i] = "word "
	}
	m := &sharedModel{tokens: tokens}
	var n int
	emit := func(e agent.Event) {
		if e.Type == agent.EventMessageUpdate {
			n += len(e.Message.Text())
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		m.reqs = nil
		a := agent.New(agent.Config{Model: m, Now: fixedNow}, nil)
		if err := a.Prompt(b.Context(), emit, user("talk")); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	per := float64(b.N * len(tokens))
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/per, "B/token")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/per, "allocs/token")
}
