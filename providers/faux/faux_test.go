package faux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
)

func collect(t *testing.T, m llm.Model, ctx context.Context, req llm.Request) ([]llm.Event, *llm.Message) {
	t.Helper()
	var evs []llm.Event
	var final *llm.Message
	for e := range m.Stream(ctx, req) {
		evs = append(evs, e)
		if e.Type == llm.EventDone || e.Type == llm.EventError {
			if final != nil {
				t.Fatalf("second terminal event %s", e.Type)
			}
			final = e.Message
		}
	}
	if final == nil {
		t.Fatal("no terminal event")
	}
	return evs, final
}

func types(evs []llm.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Type))
	}
	return strings.Join(s, " ")
}

func TestTurns(t *testing.T) {
	info := llm.ModelInfo{ID: "m", Provider: "p", Cost: llm.ModelCost{Input: 1, Output: 2}}
	tests := []struct {
		name       string
		turn       faux.Turn
		wantTypes  string
		wantReason llm.StopReason
		wantText   string
		wantErr    string
	}{
		{"text", faux.Text("hi there"), "start text_start text_delta text_delta text_end done", llm.StopStop, "hi there", ""},
		{"thinking", faux.Thinking("hmm", "ok"), "start thinking_start thinking_delta thinking_end text_start text_delta text_end done", llm.StopStop, "ok", ""},
		{"tools", faux.ToolCalls(faux.Call("id1", "bash", `{"command":"ls"}`)), "start toolcall_start toolcall_delta toolcall_delta toolcall_delta toolcall_delta toolcall_end done", llm.StopToolUse, "", ""},
		{"error", faux.Error("529 overloaded"), "start error", llm.StopError, "", "529 overloaded"},
		{"text then error", faux.Turn{Text: "part", Err: "boom"}, "start text_start text_delta text_end error", llm.StopError, "part", "boom"},
		{"length", faux.Turn{Text: "x", StopReason: llm.StopLength}, "start text_start text_delta text_end done", llm.StopLength, "x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := faux.New(info, tt.turn)
			evs, final := collect(t, m, t.Context(), llm.Request{Messages: []llm.Message{llm.UserText("hello", 1)}})
			if got := types(evs); got != tt.wantTypes {
				t.Errorf("events = %s\nwant     %s", got, tt.wantTypes)
			}
			if final.StopReason != tt.wantReason || final.Text() != tt.wantText || final.ErrorMessage != tt.wantErr {
				t.Errorf("final = %q %q %q", final.StopReason, final.Text(), final.ErrorMessage)
			}
			if final.API != "faux" || final.Provider != "p" || final.Model != "m" {
				t.Errorf("identity = %s %s %s", final.API, final.Provider, final.Model)
			}
			if final.Usage.Input == 0 || final.Usage.Cost.Total == 0 {
				t.Errorf("usage not estimated/priced: %+v", final.Usage)
			}
		})
	}
}

func TestToolCallArguments(t *testing.T) {
	m := faux.New(llm.ModelInfo{}, faux.ToolCalls(faux.Call("a", "bash", `{"command":"ls -la"}`), faux.Call("b", "read", `{"path":"x"}`)))
	evs, final := collect(t, m, t.Context(), llm.Request{})
	calls := final.ToolCalls()
	if len(calls) != 2 || calls[0].ID != "a" || string(calls[0].Arguments) != `{"command":"ls -la"}` || calls[1].Name != "read" {
		t.Fatalf("calls = %+v", calls)
	}
	for _, e := range evs {
		if e.Type == llm.EventToolCallDelta && !json.Valid(e.Partial.Content[e.ContentIndex].Arguments) {
			t.Errorf("partial args not valid JSON: %s", e.Partial.Content[e.ContentIndex].Arguments)
		}
	}
}

func TestScriptOrderAndRequests(t *testing.T) {
	m := faux.New(llm.ModelInfo{}, faux.Text("one"), faux.Text("two"))
	var got []string
	for i := range 3 {
		_, final := collect(t, m, t.Context(), llm.Request{SystemPrompt: "sys", Messages: []llm.Message{llm.UserText("q", int64(i))}})
		got = append(got, final.Text())
	}
	if strings.Join(got, ",") != "one,two,two" {
		t.Errorf("texts = %v, want one,two,two (last repeated)", got)
	}
	m.Push(faux.Text("three"))
	if _, final := collect(t, m, t.Context(), llm.Request{}); final.Text() != "three" {
		t.Errorf("pushed turn not played: %q", final.Text())
	}
	reqs := m.Requests()
	if len(reqs) != 4 || reqs[0].SystemPrompt != "sys" || reqs[2].Messages[0].Timestamp != 2 || m.Calls() != 4 {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestEcho(t *testing.T) {
	m := faux.New(llm.ModelInfo{})
	_, final := collect(t, m, t.Context(), llm.Request{Messages: []llm.Message{llm.UserText("ping pong", 1)}})
	if !strings.Contains(final.Text(), "ping pong") {
		t.Errorf("echo text = %q", final.Text())
	}
}

func TestReplyFunc(t *testing.T) {
	m := faux.New(llm.ModelInfo{}, faux.Turn{Reply: func(r llm.Request) faux.Turn { return faux.Text(r.SystemPrompt) }})
	if _, final := collect(t, m, t.Context(), llm.Request{SystemPrompt: "abc"}); final.Text() != "abc" {
		t.Errorf("text = %q", final.Text())
	}
}

func TestDelayAndAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := faux.New(llm.ModelInfo{}, faux.Text("a b c d e f").WithDelay(time.Second))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		start := time.Now()
		var final *llm.Message
		deltas := 0
		for e := range m.Stream(ctx, llm.Request{}) {
			if e.Type == llm.EventTextDelta {
				deltas++
				if deltas == 2 {
					cancel()
				}
			}
			if e.Message != nil {
				final = e.Message
			}
		}
		if final == nil || final.StopReason != llm.StopAborted || final.ErrorMessage != "Request was aborted" {
			t.Fatalf("final = %+v", final)
		}
		if final.Text() != "a b " {
			t.Errorf("partial text = %q, want %q", final.Text(), "a b ")
		}
		if el := time.Since(start); el != 3*time.Second {
			t.Errorf("elapsed (fake clock) = %v, want 3s", el)
		}
	})
}

func TestConsumerStopsEarly(t *testing.T) {
	m := faux.New(llm.ModelInfo{}, faux.Text("a b c"))
	n := 0
	for range m.Stream(t.Context(), llm.Request{}) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("n = %d", n)
	}
}

func TestTokens(t *testing.T) {
	for _, s := range []string{"", "a", "a b", " lead", "x  y\nz "} {
		if got := strings.Join(faux.Tokens(s), ""); got != s {
			t.Errorf("Tokens(%q) joined = %q", s, got)
		}
	}
}

// TestRequestLogIsBounded: a faux model behind a long-running gateway
// keeps the most recent requests only, and still counts every call.
func TestRequestLogIsBounded(t *testing.T) {
	m := faux.New(llm.ModelInfo{ID: "m"}, faux.Text("ok"))
	for i := range 1000 + 5 {
		for range m.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.UserText(fmt.Sprint(i), 1)}}) {
		}
	}
	reqs := m.Requests()
	if m.Calls() != 1000+5 || len(reqs) != 1000 {
		t.Fatalf("calls %d, kept %d", m.Calls(), len(reqs))
	}
	if first, last := reqs[0].Messages[0].Text(), reqs[len(reqs)-1].Messages[0].Text(); first != "5" || last != fmt.Sprint(1000+4) {
		t.Fatalf("kept requests %s..%s, want the most recent", first, last)
	}
}

func TestEchoQuotesEveryNewUserMessage(t *testing.T) {
	u := func(s string) llm.Message { return llm.UserText(s, 0) }
	a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("ok")}}
	tr := llm.Message{Role: llm.RoleToolResult, Content: []llm.Content{llm.TextBlock("out")}}
	for _, tc := range []struct {
		name string
		msgs []llm.Message
		want []string
	}{
		{"one", []llm.Message{u("a")}, []string{"a"}},
		{"two arrived together", []llm.Message{u("old"), a, u("b"), u("c")}, []string{"b", "c"}},
		{"after a tool result", []llm.Message{u("q"), a, tr}, []string{"q"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := faux.Echo().Reply(llm.Request{Messages: tc.msgs}).Text
			for _, w := range tc.want {
				if strings.Count(got, "You said: "+w+"\n") != 1 {
					t.Errorf("echo = %q, want %q quoted once", got, w)
				}
			}
			if n := strings.Count(got, "You said: "); n != len(tc.want) {
				t.Errorf("echo quotes %d messages, want %d: %q", n, len(tc.want), got)
			}
		})
	}
}

// TestWithoutLog: a model without a request log plays its script and
// counts its calls as any other, and keeps no request.
func TestWithoutLog(t *testing.T) {
	m := faux.New(llm.ModelInfo{}, faux.Text("one"), faux.Text("two")).WithoutLog()
	for _, want := range []string{"one", "two", "two"} {
		_, final := collect(t, m, context.Background(), llm.Request{Messages: []llm.Message{llm.UserText("hi", 1)}})
		if got := final.Text(); got != want {
			t.Errorf("answer = %q, want %q", got, want)
		}
	}
	if got := m.Calls(); got != 3 {
		t.Errorf("Calls = %d, want 3", got)
	}
	if got := m.Requests(); len(got) != 0 {
		t.Errorf("Requests = %d requests, want none", len(got))
	}
}
