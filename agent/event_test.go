package agent_test

import (
	"encoding/json"
	"testing"

	"github.com/pibot/pibot/agent"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

func TestEventJSON(t *testing.T) {
	msg := llm.UserText("hi", 5)
	tests := []struct {
		ev   agent.Event
		want string
	}{
		{agent.Event{Type: agent.EventAgentStart}, `{"type":"agent_start"}`},
		{agent.Event{Type: agent.EventMessageStart, Message: &msg}, `{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5}}`},
		{agent.Event{Type: agent.EventMessageUpdate, AssistantEvent: &llm.Event{Type: llm.EventTextDelta, ContentIndex: 0, Delta: "h", Partial: &msg}, Message: &msg},
			`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"h","partial":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5}},"message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5}}`},
		{agent.Event{Type: agent.EventToolExecutionStart, ToolCallID: "c1", ToolName: "bash", Args: json.RawMessage(`{"command":"echo rpc"}`)},
			`{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"echo rpc"}}`},
		{agent.Event{Type: agent.EventToolExecutionUpdate, ToolCallID: "c1", ToolName: "bash", Args: json.RawMessage(`{}`), Result: &llm.ToolOutput{}},
			`{"type":"tool_execution_update","toolCallId":"c1","toolName":"bash","args":{},"partialResult":{"content":[]}}`},
		{agent.Event{Type: agent.EventToolExecutionEnd, ToolCallID: "c1", ToolName: "bash", Result: &llm.ToolOutput{Content: []llm.Content{llm.TextBlock("rpc\n")}}},
			`{"type":"tool_execution_end","toolCallId":"c1","toolName":"bash","result":{"content":[{"type":"text","text":"rpc\n"}]},"isError":false}`},
		{agent.Event{Type: agent.EventTurnEnd, Message: &msg}, `{"type":"turn_end","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5},"toolResults":[]}`},
		{agent.Event{Type: agent.EventAgentEnd}, `{"type":"agent_end","messages":[]}`},
		{agent.Event{Type: agent.EventQueueUpdate, Steering: []string{"x"}}, `{"type":"queue_update","steering":["x"],"followUp":[]}`},
		{agent.Event{Type: agent.EventAutoRetryStart, Attempt: 1, MaxAttempts: 3, DelayMs: 2000, ErrorMessage: "529 overloaded"},
			`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"529 overloaded"}`},
		{agent.Event{Type: agent.EventAutoRetryEnd, Success: true, Attempt: 1}, `{"type":"auto_retry_end","success":true,"attempt":1}`},
		{agent.Event{Type: agent.EventAutoRetryEnd, Attempt: 3, FinalError: "x"}, `{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"x"}`},
		{agent.Event{Type: agent.EventCompactionStart, Reason: "threshold"}, `{"type":"compaction_start","reason":"threshold"}`},
		{agent.Event{Type: agent.EventCompactionEnd, Reason: "overflow", WillRetry: true, Compaction: &compaction.Result{Summary: "s", FirstKeptEntryID: "e1", TokensBefore: 9,
			Details: compaction.FileDetails{ReadFiles: []string{"a"}, ModifiedFiles: []string{}}}},
			`{"type":"compaction_end","reason":"overflow","result":{"summary":"s","firstKeptEntryId":"e1","tokensBefore":9,"details":{"readFiles":["a"],"modifiedFiles":[]}},"aborted":false,"willRetry":true}`},
		{agent.Event{Type: agent.EventCompactionEnd, Reason: "threshold", ErrorMessage: "boom"}, `{"type":"compaction_end","reason":"threshold","aborted":false,"willRetry":false,"errorMessage":"boom"}`},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.ev)
		if err != nil {
			t.Fatalf("%s: %v", tt.ev.Type, err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.ev.Type, got, tt.want)
		}
	}
}
