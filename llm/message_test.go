package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// piVectors finds ../shared/testdata/pi beside the repository.
func piVectors(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for range 6 {
		p := filepath.Join(dir, "shared", "testdata", "pi")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		dir = filepath.Dir(dir)
	}
	t.Skip("shared/testdata/pi not found beside the repository")
	return ""
}

func generic(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// TestRoundTripPiMessages decodes every message pi wrote in the test
// vectors and checks that encoding gives the same JSON value back.
func TestRoundTripPiMessages(t *testing.T) {
	dir := piVectors(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	n := 0
	for _, f := range files {
		if filepath.Ext(f) != ".jsonl" || bytes.Contains([]byte(filepath.Base(f)), []byte(".context")) || bytes.Contains([]byte(filepath.Base(f)), []byte(".tree")) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 8<<20)
		for sc.Scan() {
			var e struct {
				Type    string
				Message json.RawMessage
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type != "message" {
				continue
			}
			var m Message
			if err := json.Unmarshal(e.Message, &m); err != nil {
				t.Fatalf("%s: %v", filepath.Base(f), err)
			}
			out, err := MarshalJSONNoEscape(m)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(generic(t, e.Message), generic(t, out)) {
				t.Fatalf("%s: round trip changed the message\nin:  %s\nout: %s", filepath.Base(f), e.Message, out)
			}
			n++
		}
	}
	if n < 100 {
		t.Fatalf("only %d messages checked", n)
	}
}

func TestUnknownFieldsSurvive(t *testing.T) {
	in := `{"role":"assistant","content":[{"type":"text","text":"hi","future":{"x":1}},{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls"},"newKey":true}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":5,"newTopLevel":[1,2]}`
	var m Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(m)
	if !reflect.DeepEqual(generic(t, []byte(in)), generic(t, out)) {
		t.Fatalf("lost data:\nin:  %s\nout: %s", in, out)
	}
}

func TestKeyOrderAndOptionalFields(t *testing.T) {
	exit := 7
	tests := []struct {
		name string
		m    Message
		want string
	}{
		{"user string", Message{Role: RoleUser, Content: []Content{TextBlock("hi")}, StringContent: true, Timestamp: 1}, `{"role":"user","content":"hi","timestamp":1}`},
		{"tool result without details", Message{Role: RoleToolResult, ToolCallID: "c", ToolName: "bash", Content: []Content{TextBlock("x")}, Timestamp: 2}, `{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[{"type":"text","text":"x"}],"isError":false,"timestamp":2}`},
		{"tool result with null details", Message{Role: RoleToolResult, ToolCallID: "c", ToolName: "t", Details: json.RawMessage("null"), Timestamp: 2}, `{"role":"toolResult","toolCallId":"c","toolName":"t","content":[],"details":null,"isError":false,"timestamp":2}`},
		{"bash cancelled has no exitCode", Message{Role: RoleBashExecution, Command: "sleep", Cancelled: true, Timestamp: 3}, `{"role":"bashExecution","command":"sleep","output":"","cancelled":true,"truncated":false,"timestamp":3}`},
		{"bash exit", Message{Role: RoleBashExecution, Command: "x", Output: "o", ExitCode: &exit, Timestamp: 3}, `{"role":"bashExecution","command":"x","output":"o","exitCode":7,"cancelled":false,"truncated":false,"timestamp":3}`},
		{"html not escaped", Message{Role: RoleUser, Content: []Content{TextBlock("<a> & b")}, Timestamp: 1}, `{"role":"user","content":[{"type":"text","text":"<a> & b"}],"timestamp":1}`},
	}
	for _, tt := range tests {
		got, err := MarshalJSONNoEscape(tt.m)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tt.name, got, err, tt.want)
		}
	}
}

func TestConvertToLLM(t *testing.T) {
	exit := 2
	excl := true
	msgs := []Message{
		{Role: RoleBashExecution, Command: "ls", Output: "a\n", ExitCode: &exit},
		{Role: RoleBashExecution, Command: "x", Cancelled: true},
		{Role: RoleBashExecution, Command: "hidden", ExcludeFromContext: &excl},
		{Role: RoleBashExecution, Command: "big", Output: "o", Truncated: true, FullOutputPath: "/tmp/f"},
		{Role: RoleCustom, CustomType: "ext", Content: []Content{TextBlock("note")}, StringContent: true},
		{Role: RoleBranchSummary, Summary: "S"},
		{Role: RoleCompactionSummary, Summary: "C"},
		{Role: "weird"},
	}
	got := ConvertToLLM(msgs)
	want := []string{
		"Ran `ls`\n```\na\n\n```\n\nCommand exited with code 2",
		"Ran `x`\n(no output)\n\n(command cancelled)",
		"Ran `big`\n```\no\n```\n\n[Output truncated. Full output: /tmp/f]",
		"note",
		BranchSummaryPrefix + "S" + BranchSummarySuffix,
		CompactionSummaryPrefix + "C" + CompactionSummarySuffix,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Role != RoleUser || got[i].Text() != want[i] || got[i].StringContent {
			t.Errorf("%d: got %q (%s), want %q", i, got[i].Text(), got[i].Role, want[i])
		}
	}
}

func TestContextOverflowAndRetryable(t *testing.T) {
	tests := []struct {
		m         Message
		overflow  bool
		retryable bool
	}{
		{Message{StopReason: StopError, ErrorMessage: "prompt is too long: 250000 tokens > 200000 maximum"}, true, false},
		{Message{StopReason: StopError, ErrorMessage: "This model's maximum context length is 128000 tokens"}, true, false},
		{Message{StopReason: StopError, ErrorMessage: "429 rate limit: too many tokens"}, false, true},
		{Message{StopReason: StopError, ErrorMessage: "529 overloaded_error"}, false, true},
		{Message{StopReason: StopError, ErrorMessage: "401 invalid api key"}, false, false},
		{Message{StopReason: StopStop, Usage: Usage{Input: 900, CacheRead: 200}}, true, false},
		{Message{StopReason: StopLength, Usage: Usage{Input: 995}}, true, false},
		{Message{StopReason: StopStop, Usage: Usage{Input: 10}}, false, false},
	}
	for i, tt := range tests {
		if got := IsContextOverflow(tt.m, 1000); got != tt.overflow {
			t.Errorf("%d overflow = %v, want %v (%q)", i, got, tt.overflow, tt.m.ErrorMessage)
		}
		if got := IsRetryable(tt.m, 1000); got != tt.retryable {
			t.Errorf("%d retryable = %v, want %v (%q)", i, got, tt.retryable, tt.m.ErrorMessage)
		}
	}
}

func TestThinkingLevels(t *testing.T) {
	x := "xhigh"
	tests := []struct {
		info ModelInfo
		in   ThinkingLevel
		want ThinkingLevel
	}{
		{ModelInfo{}, ThinkingHigh, ThinkingOff},
		{ModelInfo{Reasoning: true}, ThinkingXHigh, ThinkingHigh},
		{ModelInfo{Reasoning: true, ThinkingMap: map[ThinkingLevel]*string{ThinkingXHigh: &x}}, ThinkingXHigh, ThinkingXHigh},
		{ModelInfo{Reasoning: true, ThinkingMap: map[ThinkingLevel]*string{ThinkingOff: nil, ThinkingMinimal: nil}}, ThinkingOff, ThinkingLow},
		{ModelInfo{Reasoning: true, ThinkingMap: map[ThinkingLevel]*string{ThinkingMedium: nil}}, ThinkingMedium, ThinkingHigh},
	}
	for i, tt := range tests {
		if got := tt.info.ClampThinking(tt.in); got != tt.want {
			t.Errorf("%d: ClampThinking(%s) = %s, want %s", i, tt.in, got, tt.want)
		}
	}
}

func TestCostAndEventJSON(t *testing.T) {
	info := ModelInfo{Cost: ModelCost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}}
	c := info.CostOf(Usage{Input: 1_000_000, Output: 100_000, CacheRead: 1_000_000})
	if c.Input != 3 || c.Output != 1.5 || c.CacheRead != 0.3 || c.Total != 4.8 {
		t.Fatalf("cost = %+v", c)
	}
	msg := Message{Role: RoleAssistant, Content: []Content{TextBlock("hi")}, StopReason: StopStop}
	b, _ := json.Marshal(Event{Type: EventTextDelta, ContentIndex: 1, Delta: "h", Partial: &msg})
	if !bytes.HasPrefix(b, []byte(`{"type":"text_delta","contentIndex":1,"delta":"h","partial":{"role":"assistant"`)) {
		t.Fatalf("event json %s", b)
	}
	b, _ = json.Marshal(Event{Type: EventError, Reason: StopAborted, Message: &msg})
	if !bytes.HasPrefix(b, []byte(`{"type":"error","reason":"aborted","error":{`)) {
		t.Fatalf("error event json %s", b)
	}
}

func FuzzMessageRoundTrip(f *testing.F) {
	f.Add([]byte(`{"role":"user","content":"hi","timestamp":1}`))
	f.Add([]byte(`{"role":"assistant","content":[{"type":"thinking","thinking":"x","redacted":true}],"usage":{"input":1},"stopReason":"stop","timestamp":1,"z":null}`))
	f.Add([]byte(`{"role":"toolResult","toolCallId":"a","content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"details":{"a":[1]},"isError":true,"timestamp":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m Message
		if json.Unmarshal(data, &m) != nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal after successful unmarshal: %v", err)
		}
		var m2 Message
		if err := json.Unmarshal(out, &m2); err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
		out2, _ := json.Marshal(m2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// TestStringsAndNumbersEncodeLikeEncodingJSON: what pibot encodes itself
// is exactly what encoding/json (without HTML escaping) writes.
func TestStringsAndNumbersEncodeLikeEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "abc", "toolResult", "2026-12-01T08:00:00.000Z", "a<b>&c", "tab\there", "quote\"", `back\slash`,
		"new\nline", "ünïcode", "\u2028", "a\u2029b", "\x7f", "\x00", "\b\f\r\x1f", "bad \xff utf8 \xc3", "emoji 🙂 and — dash", "\U0010ffff"} {
		want, _ := MarshalJSONNoEscape(s)
		if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: wrote %s, encoding/json %s", s, got[1:], want)
		}
	}
	for _, v := range []any{int64(0), int64(-42), int64(1700000000000), 7, true, false,
		0.0, 1.5, -0.25, 0.000001, 0.0000001, 1e20, 1e21, 123456789.125, 3e-12, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		w := newObjWriter(nil)
		w.val("k", v)
		got, _ := w.close()
		want, _ := MarshalJSONNoEscape(map[string]any{"k": v})
		if string(got) != string(want) {
			t.Errorf("%v: wrote %s, encoding/json %s", v, got, want)
		}
	}
	for _, f := range []float64{math.Inf(1), math.NaN()} {
		w := newObjWriter(nil)
		w.val("k", f)
		if _, err := w.close(); err == nil {
			t.Errorf("%v: no error", f)
		}
	}
}
