package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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

const testKey = "sk-ant-test-SECRET-xyz"

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

func testInfo() llm.ModelInfo {
	return llm.ModelInfo{ID: "claude-sonnet-4-5", Provider: "anthropic", Reasoning: true, Input: []string{"text", "image"},
		Cost: llm.ModelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, ContextWindow: 200000, MaxTokens: 64000}
}

func newModel(t *testing.T, srv *providertest.Server, info llm.ModelInfo, sl *sleeps, log *bytes.Buffer) *Model {
	t.Helper()
	if sl == nil {
		sl = &sleeps{}
	}
	logger := slog.New(slog.DiscardHandler)
	if log != nil {
		logger = slog.New(slog.NewTextHandler(log, nil))
	}
	return New(Config{Info: info, BaseURL: srv.URL, APIKey: secret.New(testKey), HTTP: srv.Client(), Logger: logger,
		Retry: transport.RetryPolicy{Sleep: sl.sleep}})
}

func req() llm.Request {
	return llm.Request{SystemPrompt: "Be brief.", Messages: []llm.Message{llm.UserText("hi", 1)}}
}

func TestTranscripts(t *testing.T) {
	mainUsage := llm.Usage{Input: 472, CacheWrite: 100, CacheRead: 2000}
	tests := []struct {
		file   string
		types  string
		reason llm.StopReason
		text   string
		check  func(t *testing.T, m *llm.Message)
		output int64
		errSub string
	}{
		{"text.sse", "start text_start text_delta text_delta text_end done", llm.StopStop, "Hello! How can I help?", nil, 15, ""},
		{"thinking.sse", "start thinking_start thinking_delta thinking_delta thinking_end thinking_start thinking_delta thinking_end text_start text_delta text_end done",
			llm.StopStop, "27 * 453 = 12,231", func(t *testing.T, m *llm.Message) {
				th, red := m.Content[0], m.Content[1]
				if !strings.HasPrefix(th.Thinking, "Let me solve") || th.ThinkingSignature != "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" {
					t.Errorf("thinking = %+v", th)
				}
				if !red.Redacted || red.Thinking != "[Reasoning redacted]" || !strings.HasPrefix(red.ThinkingSignature, "EmwKAhgB") {
					t.Errorf("redacted = %+v", red)
				}
			}, 300, ""},
		{"tools.sse", "start text_start text_delta text_end toolcall_start toolcall_delta toolcall_delta toolcall_end toolcall_start toolcall_delta toolcall_delta toolcall_end done",
			llm.StopToolUse, "Let me check.", func(t *testing.T, m *llm.Message) {
				calls := m.ToolCalls()
				if len(calls) != 2 || calls[0].ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || string(calls[0].Arguments) != `{"command": "ls -la"}` ||
					calls[1].Name != "read" || string(calls[1].Arguments) != `{"path": "go.mod"}` {
					t.Errorf("calls = %+v", calls)
				}
			}, 89, ""},
		{"error.sse", "start text_start text_delta error", llm.StopError, "Partial", nil, 2, "overloaded_error: Overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/"+tt.file))
			m := newModel(t, srv, testInfo(), nil, nil)
			evs, final := providertest.Collect(t, m.Stream(t.Context(), req()))
			if got := providertest.Types(evs); got != tt.types {
				t.Errorf("events:\n got %s\nwant %s", got, tt.types)
			}
			if final.StopReason != tt.reason || final.Text() != tt.text || !strings.Contains(final.ErrorMessage, tt.errSub) {
				t.Errorf("final = %s %q %q", final.StopReason, final.Text(), final.ErrorMessage)
			}
			want := mainUsage
			want.Output = tt.output
			want.TotalTokens = want.Input + want.Output + want.CacheRead + want.CacheWrite
			want.Cost = testInfo().CostOf(want)
			if !providertest.SameUsage(final.Usage, want) {
				t.Errorf("usage = %+v, want %+v", final.Usage, want)
			}
			if final.ResponseID != "msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY" || final.API != API {
				t.Errorf("id/api = %q %q", final.ResponseID, final.API)
			}
			if tt.check != nil {
				tt.check(t, final)
			}
			r := srv.Requests()[0]
			if r.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != testKey || r.Header.Get("Anthropic-Version") != Version || r.Header.Get("Authorization") != "" {
				t.Errorf("request path/headers = %s %v", r.Path, r.Header)
			}
		})
	}
}

func TestRequestBody(t *testing.T) {
	adaptiveInfo := testInfo()
	adaptiveInfo.ID = "claude-opus-4-6"
	plain := testInfo()
	plain.Reasoning = false
	tests := []struct {
		name  string
		info  llm.ModelInfo
		think llm.ThinkingLevel
		want  []string
		not   []string
	}{
		{"budget", testInfo(), llm.ThinkingMedium, []string{`"thinking":{"budget_tokens":8192,"type":"enabled"}`, `"max_tokens":40192`}, []string{`"temperature"`}},
		{"off", testInfo(), llm.ThinkingOff, []string{`"thinking":{"type":"disabled"}`, `"max_tokens":32000`, `"temperature":0.5`}, nil},
		{"adaptive", adaptiveInfo, llm.ThinkingMinimal, []string{`"thinking":{"display":"summarized","type":"adaptive"}`, `"output_config":{"effort":"low"}`}, []string{"budget_tokens"}},
		{"not reasoning", plain, llm.ThinkingHigh, []string{`"temperature":0.5`}, []string{`"thinking"`}},
		{"caching", testInfo(), "", []string{`"system":[{"cache_control":{"type":"ephemeral"},"text":"Be brief.","type":"text"}]`,
			`"content":[{"cache_control":{"type":"ephemeral"},"text":"hi","type":"text"}]`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
			m := newModel(t, srv, tt.info, nil, nil)
			r := req()
			r.Thinking = tt.think
			temp := 0.5
			r.Temperature = &temp
			providertest.Collect(t, m.Stream(t.Context(), r))
			raw := srv.Requests()[0].Body
			body := string(raw)
			for _, w := range tt.want {
				if !providertest.HasJSON(raw, w) {
					t.Errorf("body lacks %s\n%s", w, body)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(body, w) {
					t.Errorf("body has %s\n%s", w, body)
				}
			}
		})
	}
}

func TestReplay(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/thinking.sse"))
	m := newModel(t, srv, testInfo(), nil, nil)
	_, first := providertest.Collect(t, m.Stream(t.Context(), req()))
	foreign := llm.Message{Role: llm.RoleAssistant, API: "openai-responses", Provider: "openai", Model: "gpt-5", StopReason: llm.StopToolUse,
		Content: []llm.Content{
			{Type: llm.ContentThinking, Thinking: "foreign thought", ThinkingSignature: `{"type":"reasoning"}`},
			{Type: llm.ContentToolCall, ID: "call_1|fc_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)},
		}}
	r := req()
	r.Messages = append(r.Messages, *first, llm.UserText("next", 2), foreign,
		llm.Message{Role: llm.RoleToolResult, ToolCallID: "call_1|fc_1", ToolName: "bash", Content: []llm.Content{llm.TextBlock("ok")}})
	providertest.Collect(t, m.Stream(t.Context(), r))
	body := srv.Requests()[1].Body
	for _, w := range []string{
		`{"signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds","thinking":"Let me solve`,
		`{"data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP","type":"redacted_thinking"}`,
		`{"text":"foreign thought","type":"text"}`,
		`{"id":"call_1_fc_1","input":{"command":"ls"},"name":"bash","type":"tool_use"}`,
		`"tool_use_id":"call_1_fc_1"`,
	} {
		// The first fragment is a prefix, not complete JSON.
		if !providertest.HasJSON(body, w) && !strings.Contains(string(body), w) {
			t.Errorf("body lacks %s\n%s", w, body)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name     string
		resp     []providertest.Response
		reqs     int
		sleeps   int
		reason   llm.StopReason
		errSub   string
		overflow bool
	}{
		{"529 then ok", []providertest.Response{providertest.JSONError(529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, nil),
			providertest.SSE(t, "testdata/text.sse")}, 2, 1, llm.StopStop, "", false},
		{"429 retry-after", []providertest.Response{providertest.JSONError(429, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, map[string]string{"Retry-After": "7"}),
			providertest.SSE(t, "testdata/text.sse")}, 2, 1, llm.StopStop, "", false},
		{"401", []providertest.Response{providertest.JSONError(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, nil)}, 1, 0, llm.StopError, "authentication_error", false},
		{"overflow", []providertest.Response{providertest.JSONError(400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 213462 tokens > 200000 maximum"}}`, nil)}, 1, 0, llm.StopError, "prompt is too long", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := providertest.NewServer(t, tt.resp...)
			sl := &sleeps{}
			var log bytes.Buffer
			m := newModel(t, srv, testInfo(), sl, &log)
			_, final := providertest.Collect(t, m.Stream(t.Context(), req()))
			if final.StopReason != tt.reason || !strings.Contains(final.ErrorMessage, tt.errSub) {
				t.Errorf("final = %s %q", final.StopReason, final.ErrorMessage)
			}
			if len(srv.Requests()) != tt.reqs || len(sl.d) != tt.sleeps {
				t.Errorf("requests %d sleeps %v", len(srv.Requests()), sl.d)
			}
			if tt.name == "429 retry-after" && sl.d[0] != 7*time.Second {
				t.Errorf("retry-after not honoured: %v", sl.d)
			}
			if llm.IsContextOverflow(*final, 200000) != tt.overflow {
				t.Errorf("overflow detection wrong for %q", final.ErrorMessage)
			}
			if strings.Contains(final.ErrorMessage+log.String(), testKey) {
				t.Error("key leaked")
			}
		})
	}
}

func TestAbort(t *testing.T) {
	before := runtime.NumGoroutine()
	resp := providertest.SSE(t, "testdata/abort.sse")
	resp.Stall = true
	srv := providertest.NewServer(t, resp)
	tr := &http.Transport{}
	m := New(Config{Info: testInfo(), BaseURL: srv.URL, APIKey: secret.New(testKey), HTTP: &http.Client{Transport: tr},
		Retry: transport.RetryPolicy{Sleep: (&sleeps{}).sleep}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var evs []llm.Event
	for e := range m.Stream(ctx, req()) {
		evs = append(evs, e)
		if e.Type == llm.EventTextDelta {
			cancel()
		}
	}
	if err := providertest.Check(evs); err != nil {
		t.Fatal(err)
	}
	final := evs[len(evs)-1].Message
	if final.StopReason != llm.StopAborted || final.ErrorMessage != "Request was aborted" || final.Text() != "Working on it" {
		t.Errorf("final = %s %q %q", final.StopReason, final.ErrorMessage, final.Text())
	}
	tr.CloseIdleConnections()
	srv.Close()
	for range 200 {
		if runtime.NumGoroutine() <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("goroutines: %d > %d\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
}
