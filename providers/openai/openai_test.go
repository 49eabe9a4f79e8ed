package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/internal/secret"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/transport"
	"github.com/pibot/pibot/providers/providertest"
)

const testKey = "sk-test-SECRET-abc123"

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func testInfo() llm.ModelInfo {
	return llm.ModelInfo{ID: "gpt-4o-mini", Provider: "openai", Input: []string{"text"},
		Cost: llm.ModelCost{Input: 1, Output: 2, CacheRead: 0.5}, ContextWindow: 128000, MaxTokens: 16384}
}

func newModel(t *testing.T, api string, srv *providertest.Server, info llm.ModelInfo, compat Compat, sl *sleeps, log *bytes.Buffer) llm.Model {
	t.Helper()
	return newModelHTTP(t, api, srv, srv.Client(), info, compat, sl, log)
}

func newModelHTTP(t *testing.T, api string, srv *providertest.Server, hc *http.Client, info llm.ModelInfo, compat Compat, sl *sleeps, log *bytes.Buffer) llm.Model {
	t.Helper()
	if sl == nil {
		sl = &sleeps{}
	}
	var logger *slog.Logger
	if log != nil {
		logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg := Config{Info: info, BaseURL: srv.URL + "/v1", APIKey: secret.New(testKey), Compat: compat,
		HTTP: hc, Logger: logger, Retry: transport.RetryPolicy{Sleep: sl.sleep}}
	if api == APIResponses {
		return NewResponses(cfg)
	}
	return NewCompletions(cfg)
}

func userReq() llm.Request {
	return llm.Request{SystemPrompt: "Be brief.", Messages: []llm.Message{llm.UserText("hi", 1)}}
}

func TestCompletionsTranscripts(t *testing.T) {
	tests := []struct {
		file      string
		types     string
		reason    llm.StopReason
		text      string
		thinking  string
		sigField  string
		calls     []string
		usage     llm.Usage
		errSubstr string
	}{
		{file: "cc_text.sse", types: "start text_start text_delta text_delta text_delta text_end done", reason: llm.StopStop,
			text: "Hello! How can I help?", usage: llm.Usage{Input: 93, Output: 46, CacheRead: 1024, TotalTokens: 1163}},
		{file: "cc_thinking.sse", types: "start thinking_start thinking_delta thinking_delta thinking_end text_start text_delta text_delta text_end done",
			reason: llm.StopStop, text: "Hi there!", thinking: "The user greets. Reply briefly.", sigField: "reasoning_content",
			usage: llm.Usage{Input: 20, Output: 12, TotalTokens: 32}},
		{file: "cc_reasoning.sse", types: "start thinking_start thinking_delta thinking_delta thinking_end text_start text_delta text_end done",
			reason: llm.StopLength, text: "42", thinking: "Thinking hard.", sigField: "reasoning", usage: llm.Usage{Input: 5, Output: 3, TotalTokens: 8}},
		{file: "cc_tools.sse", types: "start toolcall_start toolcall_delta toolcall_delta toolcall_delta toolcall_end toolcall_start toolcall_delta toolcall_delta toolcall_end done",
			reason: llm.StopToolUse, calls: []string{`call_DdmO9pD3xa9XTPNJ32zg2hcA bash {"command": "ls -la"}`, `call_ABCd3EfG4hIjK5lMn6oPq7rS read {"path": "README.md"}`},
			usage: llm.Usage{Input: 200, Output: 40, TotalTokens: 240}},
		{file: "cc_error.sse", types: "start text_start text_delta text_delta error", reason: llm.StopError, text: "Partial",
			errSubstr: "The server had an error"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/"+tt.file))
			m := newModel(t, APICompletions, srv, testInfo(), Compat{}, nil, nil)
			evs, final := providertest.Collect(t, m.Stream(t.Context(), userReq()))
			checkFinal(t, evs, final, tt.types, tt.reason, tt.text, tt.thinking, tt.sigField, tt.calls, tt.usage, tt.errSubstr)
			if final.ResponseID != "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT" || final.ResponseModel != "gpt-4o-mini-2024-07-18" {
				t.Errorf("response id/model = %q %q", final.ResponseID, final.ResponseModel)
			}
		})
	}
}

func checkFinal(t *testing.T, evs []llm.Event, final *llm.Message, types string, reason llm.StopReason, text, thinking, sigField string, calls []string, usage llm.Usage, errSubstr string) {
	t.Helper()
	if got := providertest.Types(evs); got != types {
		t.Errorf("events:\n got %s\nwant %s", got, types)
	}
	if final.StopReason != reason {
		t.Errorf("stopReason = %s, want %s (%s)", final.StopReason, reason, final.ErrorMessage)
	}
	if final.Text() != text {
		t.Errorf("text = %q, want %q", final.Text(), text)
	}
	var th, sig string
	var gotCalls []string
	for _, c := range final.Content {
		switch c.Type {
		case llm.ContentThinking:
			th += c.Thinking
			sig = c.ThinkingSignature
		case llm.ContentToolCall:
			gotCalls = append(gotCalls, c.ID+" "+c.Name+" "+string(c.Arguments))
		}
	}
	if th != thinking || (sigField != "" && sig != sigField) {
		t.Errorf("thinking = %q sig %q, want %q sig %q", th, sig, thinking, sigField)
	}
	if strings.Join(gotCalls, "\n") != strings.Join(calls, "\n") {
		t.Errorf("calls:\n got %v\nwant %v", gotCalls, calls)
	}
	u := final.Usage
	u.Cost = llm.Cost{}
	if errSubstr == "" && !providertest.SameUsage(u, usage) {
		t.Errorf("usage = %+v, want %+v", u, usage)
	}
	if want := testInfo().CostOf(final.Usage); final.Usage.Cost != want {
		t.Errorf("cost = %+v, want %+v", final.Usage.Cost, want)
	}
	if !strings.Contains(final.ErrorMessage, errSubstr) || (errSubstr == "") != (final.ErrorMessage == "") {
		t.Errorf("errorMessage = %q, want containing %q", final.ErrorMessage, errSubstr)
	}
	for _, e := range evs {
		if e.Type == llm.EventToolCallDelta && !json.Valid(e.Partial.Content[e.ContentIndex].Arguments) {
			t.Errorf("partial arguments invalid: %s", e.Partial.Content[e.ContentIndex].Arguments)
		}
	}
}

func TestResponsesTranscripts(t *testing.T) {
	tests := []struct {
		file      string
		types     string
		reason    llm.StopReason
		text      string
		thinking  string
		calls     []string
		usage     llm.Usage
		errSubstr string
	}{
		{file: "rs_text.sse", types: "start text_start text_delta text_delta text_end done", reason: llm.StopStop, text: "Hi there!",
			usage: llm.Usage{Input: 37, Output: 11, TotalTokens: 48}},
		{file: "rs_reasoning.sse", types: "start thinking_start thinking_delta thinking_delta thinking_delta thinking_delta thinking_end text_start text_delta text_end done",
			reason: llm.StopStop, text: "Hi there!", thinking: "**Greeting**\n\nThe user says hi.\n\nAnswer.",
			usage: llm.Usage{Input: 200, Output: 300, CacheRead: 1000, TotalTokens: 1500}},
		{file: "rs_tools.sse", types: "start toolcall_start toolcall_delta toolcall_delta toolcall_end toolcall_start toolcall_delta toolcall_end done",
			reason: llm.StopToolUse, calls: []string{`call_12345xyz|fc_12345xyz bash {"command":"ls"}`, `call_67890abc|fc_67890abc read {"path":"go.mod"}`},
			usage: llm.Usage{Input: 80, Output: 30, TotalTokens: 110}},
		{file: "rs_error.sse", types: "start text_start text_delta text_delta error", reason: llm.StopError, text: "Hi there!",
			errSubstr: "server_error The server had an error"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/"+tt.file))
			m := newModel(t, APIResponses, srv, testInfo(), Compat{}, nil, nil)
			evs, final := providertest.Collect(t, m.Stream(t.Context(), userReq()))
			checkFinal(t, evs, final, tt.types, tt.reason, tt.text, tt.thinking, "", tt.calls, tt.usage, tt.errSubstr)
			if r := srv.Requests(); len(r) != 1 || r[0].Path != "/v1/responses" {
				t.Errorf("requests = %+v", r)
			}
		})
	}
}

func TestResponsesReasoningReplay(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/rs_reasoning.sse"))
	info := testInfo()
	info.Reasoning = true
	m := newModel(t, APIResponses, srv, info, Compat{}, nil, nil)
	req := userReq()
	req.Thinking = llm.ThinkingHigh
	_, final := providertest.Collect(t, m.Stream(t.Context(), req))
	sig := final.Content[0].ThinkingSignature
	if !strings.Contains(sig, `"encrypted_content":"gAAAAABohs8C3k0encrypted"`) {
		t.Fatalf("reasoning item not kept: %q", sig)
	}
	if final.Content[1].TextSignature != "msg_67ccd2bf17f0819081ff3bb2cf6508e6" {
		t.Errorf("text signature = %q", final.Content[1].TextSignature)
	}
	// Replay: the reasoning item goes back verbatim.
	req.Messages = append(req.Messages, *final, llm.UserText("again", 2))
	for range m.Stream(t.Context(), req) {
	}
	reqs := srv.Requests()
	body := reqs[1].Body
	for _, want := range []string{`"encrypted_content":"gAAAAABohs8C3k0encrypted"`, `"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6"`,
		`"reasoning":{"effort":"high","summary":"auto"}`, `"include":["reasoning.encrypted_content"]`, `"role":"developer"`} {
		if !providertest.HasJSON(body, want) {
			t.Errorf("replay body lacks %s\n%s", want, body)
		}
	}
}

func TestCompletionsRequestBody(t *testing.T) {
	reasoning := testInfo()
	reasoning.Reasoning = true
	yes := true
	tests := []struct {
		name    string
		base    string
		info    llm.ModelInfo
		compat  Compat
		think   llm.ThinkingLevel
		want    []string
		notWant []string
	}{
		{"compatible server", "", testInfo(), Compat{}, "", []string{`"max_tokens":16384`, `"role":"system"`, `"stream_options":{"include_usage":true}`}, []string{`"store"`, `reasoning_effort`}},
		{"reasoning effort", "", reasoning, Compat{}, llm.ThinkingLow, []string{`"reasoning_effort":"low"`}, []string{`"temperature"`}},
		{"developer and completion tokens", "", reasoning, Compat{DeveloperRole: &yes, MaxTokensField: "max_completion_tokens"}, "", []string{`"role":"developer"`, `"max_completion_tokens":16384`}, []string{`reasoning_effort`}},
		{"qwen template", "", reasoning, Compat{ThinkingFormat: "qwen-chat-template"}, llm.ThinkingHigh, []string{`"chat_template_kwargs":{"enable_thinking":true,"preserve_thinking":true}`}, nil},
		{"openrouter off", "", reasoning, Compat{ThinkingFormat: "openrouter"}, llm.ThinkingOff, []string{`"reasoning":{"effort":"none"}`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/cc_text.sse"))
			m := newModel(t, APICompletions, srv, tt.info, tt.compat, nil, nil)
			req := userReq()
			req.Thinking = tt.think
			temp := 0.5
			req.Temperature = &temp
			providertest.Collect(t, m.Stream(t.Context(), req))
			r := srv.Requests()[0]
			body := string(r.Body)
			for _, w := range tt.want {
				if !providertest.HasJSON(r.Body, w) {
					t.Errorf("body lacks %s\n%s", w, body)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(body, w) {
					t.Errorf("body has %s\n%s", w, body)
				}
			}
			if r.Header.Get("Authorization") != "Bearer "+testKey || r.Path != "/v1/chat/completions" {
				t.Errorf("auth/path = %q %q", r.Header.Get("Authorization"), r.Path)
			}
		})
	}
}

func TestCompletionsReplayToolsAndReasoning(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/cc_text.sse"))
	info := testInfo()
	m := newModel(t, APICompletions, srv, info, Compat{}, nil, nil)
	asst := llm.Message{Role: llm.RoleAssistant, API: APICompletions, Provider: "openai", Model: info.ID, StopReason: llm.StopToolUse,
		Content: []llm.Content{
			{Type: llm.ContentThinking, Thinking: "plan", ThinkingSignature: "reasoning_content"},
			{Type: llm.ContentToolCall, ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)},
			{Type: llm.ContentToolCall, ID: "call_2", Name: "bash", Arguments: json.RawMessage(`{"command":"pwd"}`)},
		}}
	tr := llm.Message{Role: llm.RoleToolResult, ToolCallID: "call_1", ToolName: "bash", Content: []llm.Content{llm.TextBlock("a.txt")}}
	req := llm.Request{Messages: []llm.Message{llm.UserText("list", 1), asst, tr}}
	providertest.Collect(t, m.Stream(t.Context(), req))
	body := srv.Requests()[0].Body
	for _, w := range []string{`"reasoning_content":"plan"`, `{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}`,
		`{"role":"tool","content":"a.txt","tool_call_id":"call_1"}`, `{"role":"tool","content":"No result provided","tool_call_id":"call_2"}`} {
		if !providertest.HasJSON(body, w) {
			t.Errorf("body lacks %s\n%s", w, body)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name      string
		resp      []providertest.Response
		wantReqs  int
		wantSleep []time.Duration
		reason    llm.StopReason
		errSubstr string
		overflow  bool
	}{
		{"429 then success", []providertest.Response{
			providertest.JSONError(429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","code":"rate_limit_exceeded"}}`, map[string]string{"Retry-After": "2"}),
			providertest.SSE(t, "testdata/cc_text.sse")}, 2, []time.Duration{2 * time.Second}, llm.StopStop, "", false},
		{"500 backoff", []providertest.Response{
			providertest.JSONError(500, `{"error":{"message":"internal"}}`, nil),
			providertest.JSONError(503, ``, nil),
			providertest.SSE(t, "testdata/cc_text.sse")}, 3, []time.Duration{time.Second, 2 * time.Second}, llm.StopStop, "", false},
		{"429 exhausted", []providertest.Response{providertest.JSONError(429, `{"error":{"message":"Too many requests"}}`, map[string]string{"Retry-After-Ms": "1500"})},
			4, []time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond}, llm.StopError, "429", false},
		{"401 not retried", []providertest.Response{providertest.JSONError(401, `{"error":{"message":"Incorrect API key provided: sk-test-SECRET-abc123.","type":"invalid_request_error","code":"invalid_api_key"}}`, nil)},
			1, nil, llm.StopError, "401", false},
		{"overflow", []providertest.Response{providertest.JSONError(400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, nil)},
			1, nil, llm.StopError, "maximum context length", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, tt.resp...)
			sl := &sleeps{}
			var log bytes.Buffer
			m := newModel(t, APICompletions, srv, testInfo(), Compat{}, sl, &log)
			_, final := providertest.Collect(t, m.Stream(t.Context(), userReq()))
			if final.StopReason != tt.reason || !strings.Contains(final.ErrorMessage, tt.errSubstr) {
				t.Errorf("final = %s %q", final.StopReason, final.ErrorMessage)
			}
			if n := len(srv.Requests()); n != tt.wantReqs {
				t.Errorf("requests = %d, want %d", n, tt.wantReqs)
			}
			if len(sl.d) != len(tt.wantSleep) {
				t.Fatalf("sleeps = %v, want %v", sl.d, tt.wantSleep)
			}
			for i := range sl.d {
				if sl.d[i] != tt.wantSleep[i] {
					t.Errorf("sleeps = %v, want %v", sl.d, tt.wantSleep)
				}
			}
			if got := llm.IsContextOverflow(*final, 128000); got != tt.overflow {
				t.Errorf("IsContextOverflow = %v", got)
			}
			if strings.Contains(final.ErrorMessage, testKey) || strings.Contains(log.String(), testKey) {
				t.Errorf("key leaked: %q / %q", final.ErrorMessage, log.String())
			}
		})
	}
}

func TestTransportErrorHasNoKey(t *testing.T) {
	info := testInfo()
	sl := &sleeps{}
	var log bytes.Buffer
	m := NewCompletions(Config{Info: info, BaseURL: "http://127.0.0.1:1/" + testKey, APIKey: secret.New(testKey),
		Logger: slog.New(slog.NewTextHandler(&log, nil)), Retry: transport.RetryPolicy{Sleep: sl.sleep, MaxRetries: 1}})
	evs, final := providertest.Collect(t, m.Stream(t.Context(), userReq()))
	if final.StopReason != llm.StopError || !strings.Contains(final.ErrorMessage, "nothing is listening") {
		t.Errorf("final = %s %q", final.StopReason, final.ErrorMessage)
	}
	// The error event carries the typed failure, on which the agent's
	// retry decides (its text says "connection refused").
	if last := evs[len(evs)-1]; llm.ShouldRetry(*final, last.Err, 0) {
		t.Errorf("the agent would retry %q (event error %v)", final.ErrorMessage, last.Err)
	} else if apiErr, ok := errors.AsType[*llm.APIError](last.Err); !ok || !apiErr.Permanent {
		t.Errorf("error event's Err = %#v, want a permanent *llm.APIError", last.Err)
	}
	if strings.Contains(final.ErrorMessage, testKey) || strings.Contains(log.String(), testKey) {
		t.Errorf("key leaked: %q / %q", final.ErrorMessage, log.String())
	}
	if len(sl.d) != 0 {
		t.Errorf("a refused connection is final, not retried: sleeps %v", sl.d)
	}

	// A connection that breaks (the server hangs up) is transient: retried.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sl = &sleeps{}
	m = NewCompletions(Config{Info: info, BaseURL: "http://" + ln.Addr().String() + "/" + testKey, APIKey: secret.New(testKey),
		Logger: slog.New(slog.NewTextHandler(&log, nil)), Retry: transport.RetryPolicy{Sleep: sl.sleep, MaxRetries: 1}})
	_, final = providertest.Collect(t, m.Stream(t.Context(), userReq()))
	if final.StopReason != llm.StopError || !strings.Contains(final.ErrorMessage, "connection") || strings.Contains(final.ErrorMessage, testKey) {
		t.Errorf("final = %s %q", final.StopReason, final.ErrorMessage)
	}
	if len(sl.d) != 1 {
		t.Errorf("a broken connection should be retried: sleeps %v", sl.d)
	}
}

func TestAbortMidStream(t *testing.T) {
	for _, api := range []string{APICompletions, APIResponses} {
		t.Run(api, func(t *testing.T) {
			before := runtime.NumGoroutine()
			file := "testdata/cc_abort.sse"
			if api == APIResponses {
				file = "testdata/rs_text.sse"
			}
			resp := providertest.SSE(t, file)
			if api == APIResponses {
				resp.Body = resp.Body[:strings.Index(resp.Body, "event: response.output_text.done")]
			}
			resp.Stall = true
			srv := providertest.NewServer(t, resp)
			tr := &http.Transport{}
			m := newModelHTTP(t, api, srv, &http.Client{Transport: tr}, testInfo(), Compat{}, nil, nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var final *llm.Message
			var evs []llm.Event
			for e := range m.Stream(ctx, userReq()) {
				evs = append(evs, e)
				if e.Type == llm.EventTextDelta && strings.Contains(e.Partial.Text(), "ed") || e.Type == llm.EventTextDelta && strings.Contains(e.Partial.Text(), "there") {
					cancel()
				}
				final = e.Message
			}
			if err := providertest.Check(evs); err != nil {
				t.Fatal(err)
			}
			if final == nil || final.StopReason != llm.StopAborted || final.ErrorMessage != "Request was aborted" || final.Text() == "" {
				t.Fatalf("final = %+v", final)
			}
			tr.CloseIdleConnections()
			srv.Close()
			waitGoroutines(t, before)
		})
	}
}

// waitGoroutines fails if the goroutine count does not come back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for range 200 {
		if runtime.NumGoroutine() <= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("goroutines: %d > %d\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
}

func TestConsumerStopsEarly(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/cc_text.sse"))
	m := newModel(t, APICompletions, srv, testInfo(), Compat{}, nil, nil)
	n := 0
	for range m.Stream(t.Context(), userReq()) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("n = %d", n)
	}
}

func TestErrorsAreAPIErrors(t *testing.T) {
	srv := providertest.NewServer(t, providertest.JSONError(401, `{"error":{"message":"bad key"}}`, nil))
	m := newModel(t, APICompletions, srv, testInfo(), Compat{}, nil, nil).(*Completions)
	params, opts, err := m.params(userReq())
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.open(t.Context(), params, opts)
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 401 || !errors.Is(err, llm.ErrAuth) {
		t.Errorf("err = %#v", err)
	}
}
