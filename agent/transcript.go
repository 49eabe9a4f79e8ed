package agent

import (
	"github.com/pibot/pibot/llm"
)

// NoResultText is the text of the synthetic result given to a tool call
// that has none (pi-ai's transformMessages uses the same text).
const NoResultText = "No result provided"

// RepairTranscript makes model messages safe to send: every tool call of an
// assistant message gets exactly one toolResult, placed before the next
// user or assistant message. It is applied before every model call.
//
//   - assistant messages that ended in error or were aborted are dropped,
//     as pi-ai does before sending (their partial tool calls have no
//     results);
//   - a tool call without a result gets a synthetic error result
//     ("No result provided");
//   - a duplicate result, or one that answers no pending call, is dropped.
//
// msgs must already be model messages (see llm.ConvertToLLM). The input is
// not modified.
func RepairTranscript(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, 0, len(msgs))
	var pendingIDs []llm.Content // calls of the last assistant still unanswered
	answered := map[string]bool{}
	flush := func() {
		for _, c := range pendingIDs {
			if !answered[c.ID] {
				out = append(out, llm.Message{
					Role:       llm.RoleToolResult,
					ToolCallID: c.ID,
					ToolName:   c.Name,
					Content:    []llm.Content{llm.TextBlock(NoResultText)},
					IsError:    true,
				})
			}
		}
		pendingIDs = nil
		answered = map[string]bool{}
	}
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			if m.StopReason == llm.StopError || m.StopReason == llm.StopAborted {
				continue
			}
			flush()
			out = append(out, m)
			pendingIDs = m.ToolCalls()
		case llm.RoleToolResult:
			if !isPending(pendingIDs, m.ToolCallID) || answered[m.ToolCallID] {
				continue
			}
			answered[m.ToolCallID] = true
			out = append(out, m)
		default:
			flush()
			out = append(out, m)
		}
	}
	flush()
	return out
}

func isPending(calls []llm.Content, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}
