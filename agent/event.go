package agent

import (
	"bytes"
	"encoding/json"

	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

// EventType names an agent or session event, as pi names them.
type EventType string

// Event types. The first ten are pi's agent events; the others are the
// session events of pi's AgentSession.
const (
	EventAgentStart          EventType = "agent_start"
	EventAgentEnd            EventType = "agent_end"
	EventTurnStart           EventType = "turn_start"
	EventTurnEnd             EventType = "turn_end"
	EventMessageStart        EventType = "message_start"
	EventMessageUpdate       EventType = "message_update"
	EventMessageEnd          EventType = "message_end"
	EventToolExecutionStart  EventType = "tool_execution_start"
	EventToolExecutionUpdate EventType = "tool_execution_update"
	EventToolExecutionEnd    EventType = "tool_execution_end"
	EventQueueUpdate         EventType = "queue_update"
	EventCompactionStart     EventType = "compaction_start"
	EventCompactionEnd       EventType = "compaction_end"
	EventAutoRetryStart      EventType = "auto_retry_start"
	EventAutoRetryEnd        EventType = "auto_retry_end"
)

// Event is one event of a run. Which fields are set depends on Type; see
// MarshalJSON for the JSON shape of each.
type Event struct {
	Type EventType

	// Message is the message of message_start/update/end and turn_end.
	// A message_update's Message and AssistantEvent (with its Partial)
	// are the run's live partial, valid only during the emit call: the
	// next update rewrites them instead of copying the message for
	// every token (pi, too, shares a partial's content array between
	// updates). A listener that keeps one copies it. Any other event's
	// Message is a copy of its own, which listeners (and the run) may
	// keep but do not change.
	Message *llm.Message
	// Tag is the caller's tag of a prompt or queued message (Tagged), on
	// its message_start and message_end. It is never written out.
	Tag any
	// AssistantEvent is the provider event behind a message_update.
	AssistantEvent *llm.Event
	// ToolResults are the tool results of a turn (turn_end).
	ToolResults []llm.Message
	// Messages are the messages created by the run (agent_end).
	Messages []llm.Message

	// Tool execution fields. Result is the final result (end) or the
	// partial result (update).
	ToolCallID string
	ToolName   string
	Args       json.RawMessage
	Result     *llm.ToolOutput
	IsError    bool

	// Steering and FollowUp are the display texts of the queues
	// (queue_update).
	Steering []string
	FollowUp []string

	// Reason is the compaction reason: "threshold", "overflow" or "manual".
	Reason string
	// Compaction is the result of a successful compaction (compaction_end).
	Compaction *compaction.Result
	// Aborted and WillRetry describe how a compaction ended.
	Aborted   bool
	WillRetry bool

	// Retry fields: Attempt (1-based), MaxAttempts, DelayMs and Success.
	Attempt     int
	MaxAttempts int
	DelayMs     int64
	Success     bool
	// ErrorMessage is the error of auto_retry_start and compaction_end;
	// FinalError the error of an unsuccessful auto_retry_end.
	ErrorMessage string
	FinalError   string
}

// MarshalJSON writes the event in the shape pi prints in --mode json and
// RPC mode, with pi's key order.
func (e Event) MarshalJSON() ([]byte, error) {
	w := &objWriter{}
	w.field("type", string(e.Type))
	switch e.Type {
	case EventAgentEnd:
		w.field("messages", nonNilMessages(e.Messages))
	case EventTurnEnd:
		w.field("message", e.Message)
		w.field("toolResults", nonNilMessages(e.ToolResults))
	case EventMessageStart, EventMessageEnd:
		w.field("message", e.Message)
	case EventMessageUpdate:
		w.field("assistantMessageEvent", e.AssistantEvent)
		w.field("message", e.Message)
	case EventToolExecutionStart:
		w.field("toolCallId", e.ToolCallID)
		w.field("toolName", e.ToolName)
		w.field("args", rawOrEmpty(e.Args))
	case EventToolExecutionUpdate:
		w.field("toolCallId", e.ToolCallID)
		w.field("toolName", e.ToolName)
		w.field("args", rawOrEmpty(e.Args))
		w.field("partialResult", toolOutputJSON(e.Result))
	case EventToolExecutionEnd:
		w.field("toolCallId", e.ToolCallID)
		w.field("toolName", e.ToolName)
		w.field("result", toolOutputJSON(e.Result))
		w.field("isError", e.IsError)
	case EventQueueUpdate:
		w.field("steering", nonNilStrings(e.Steering))
		w.field("followUp", nonNilStrings(e.FollowUp))
	case EventCompactionStart:
		w.field("reason", e.Reason)
	case EventCompactionEnd:
		w.field("reason", e.Reason)
		if e.Compaction != nil {
			w.field("result", e.Compaction)
		}
		w.field("aborted", e.Aborted)
		w.field("willRetry", e.WillRetry)
		if e.ErrorMessage != "" {
			w.field("errorMessage", e.ErrorMessage)
		}
	case EventAutoRetryStart:
		w.field("attempt", e.Attempt)
		w.field("maxAttempts", e.MaxAttempts)
		w.field("delayMs", e.DelayMs)
		w.field("errorMessage", e.ErrorMessage)
	case EventAutoRetryEnd:
		w.field("success", e.Success)
		w.field("attempt", e.Attempt)
		if e.FinalError != "" {
			w.field("finalError", e.FinalError)
		}
	}
	return w.finish()
}

// toolResultJSON is pi's AgentToolResult shape.
type toolResultJSON struct {
	Content   []llm.Content `json:"content"`
	Details   any           `json:"details,omitempty"`
	Terminate bool          `json:"terminate,omitempty"`
}

func toolOutputJSON(o *llm.ToolOutput) toolResultJSON {
	if o == nil {
		return toolResultJSON{Content: []llm.Content{}}
	}
	c := o.Content
	if c == nil {
		c = []llm.Content{}
	}
	return toolResultJSON{Content: c, Details: o.Details, Terminate: o.Terminate}
}

func nonNilMessages(m []llm.Message) []llm.Message {
	if m == nil {
		return []llm.Message{}
	}
	return m
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func rawOrEmpty(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("{}")
	}
	return r
}

// objWriter builds a JSON object whose keys keep the order they are written.
type objWriter struct {
	buf bytes.Buffer
	err error
}

func (w *objWriter) field(key string, v any) {
	if w.err != nil {
		return
	}
	if w.buf.Len() == 0 {
		w.buf.WriteByte('{')
	} else {
		w.buf.WriteByte(',')
	}
	k, _ := json.Marshal(key)
	w.buf.Write(k)
	w.buf.WriteByte(':')
	b, err := llm.MarshalJSONNoEscape(v)
	if err != nil {
		w.err = err
		return
	}
	w.buf.Write(b)
}

func (w *objWriter) finish() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.buf.Len() == 0 {
		w.buf.WriteByte('{')
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), nil
}
