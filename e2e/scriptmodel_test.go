package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptModel is a model served over the OpenAI Chat Completions API, as
// SSE, by the test process: it outlives the pibot processes it serves, so
// a restarted pibot talks to the same model. Its answers follow from the
// conversation it is sent:
//
//   - the user messages after the last final answer are the ones to
//     answer; each names itself with an id ("q3: …");
//   - when one of them asks for "the tool" and no tool was called since,
//     it calls bash once, appending a line to tools.log in pibot's
//     workspace (the tool's side effect the test counts);
//   - else it answers all of them in one message: "BEGIN-q2 … END-q2"
//     for each, streamed in chunks (slowly, over more than pibot's
//     session group window, when one of them asks for that; with ten
//     times the words, more than a Telegram message holds, when one
//     asks for it "at length").
//
// With hold set, the first request that follows a tool result waits until
// release (or until its client goes away): the test sends follow-ups then,
// which pibot steers into the run or queues for it.
type scriptModel struct {
	*httptest.Server
	// pad is how many words an answer has between its markers.
	pad int
	// chunk is the pause between two streamed chunks; slow is the pause
	// when a question asks to be answered "slowly".
	chunk, slow time.Duration

	mu       sync.Mutex
	hold     bool
	held     chan struct{} // closed when a request is held
	release  chan struct{}
	released bool
	requests int
}

// newScriptModel starts a script model; hold makes it hold the first
// answer after a tool result.
func newScriptModel(t testing.TB, hold bool) *scriptModel {
	m := &scriptModel{pad: 60, chunk: 15 * time.Millisecond, slow: 150 * time.Millisecond, hold: hold, held: make(chan struct{}), release: make(chan struct{})}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		m.let()
		m.Close()
	})
	return m
}

// let releases the held request (and any later one).
func (m *scriptModel) let() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.released {
		m.released = true
		close(m.release)
	}
}

// heldNow reports whether a request has been held.
func (m *scriptModel) heldNow() bool {
	select {
	case <-m.held:
		return true
	default:
		return false
	}
}

// calls returns how many requests the model answered or holds.
func (m *scriptModel) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// wireMessage is a Chat Completions message as pibot sends it.
type wireMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
}

// text is the message's text, whether content is a string or parts.
func (w wireMessage) text() string {
	var s string
	if json.Unmarshal(w.Content, &s) == nil {
		return s
	}
	var parts []struct{ Text string }
	_ = json.Unmarshal(w.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// questionID finds the id a user message names itself with.
var questionID = regexp.MustCompile(`\bq[0-9]+\b`)

func (m *scriptModel) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []wireMessage `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.requests++
	hold := m.hold && req.Messages[len(req.Messages)-1].Role == "tool"
	if hold {
		m.hold = false
		close(m.held)
	}
	m.mu.Unlock()
	if hold {
		select {
		case <-m.release:
		case <-r.Context().Done():
			return
		}
	}
	// The user messages since the last final answer, and whether a tool
	// was called since.
	var ids []string
	wantsTool, called, slow, long := false, false, false, false
	for _, msg := range req.Messages {
		switch {
		case msg.Role == "assistant" && len(msg.ToolCalls) == 0:
			ids, wantsTool, called, slow, long = nil, false, false, false, false
		case msg.Role == "assistant":
			called = true
		case msg.Role == "user":
			text := msg.text()
			ids = append(ids, questionID.FindAllString(text, 1)...)
			wantsTool = wantsTool || strings.Contains(text, "the tool")
			slow = slow || strings.Contains(text, "slowly")
			long = long || strings.Contains(text, "at length")
		}
	}
	pad := m.pad
	if long {
		pad *= 10
	}
	pause := m.chunk
	if slow {
		pause = m.slow
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any) bool {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if wantsTool && !called {
		send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", m.calls()), "type": "function",
			"function": map[string]any{"name": "bash", "arguments": `{"command":"echo ran >> tools.log"}`}}}}, nil)
		send(map[string]any{}, "tool_calls")
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	for i, chunk := range answerChunks(ids, pad) {
		delta := map[string]any{"content": chunk}
		if i == 0 {
			delta["role"] = "assistant"
		}
		if !send(delta, nil) {
			return
		}
		select {
		case <-time.After(pause):
		case <-r.Context().Done():
			return
		}
	}
	send(map[string]any{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// answerChunks is the answer to the questions ids, in about ten chunks:
// each id's BEGIN marker, pad words, each id's END marker.
func answerChunks(ids []string, pad int) []string {
	var words []string
	for _, id := range ids {
		words = append(words, "BEGIN-"+id)
	}
	if len(ids) == 0 {
		words = append(words, "NOTHING-TO-ANSWER")
	}
	for i := range pad {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	for _, id := range ids {
		words = append(words, "END-"+id)
	}
	var chunks []string
	step := max(1, len(words)/10)
	for i := 0; i < len(words); i += step {
		chunks = append(chunks, strings.Join(words[i:min(i+step, len(words))], " ")+" ")
	}
	return chunks
}
