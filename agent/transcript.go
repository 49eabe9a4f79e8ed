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
// not modified; when nothing needs repair it is returned as is.
func RepairTranscript(msgs []llm.Message) []llm.Message {
	out := transcript{in: msgs}
	var pendingIDs []llm.Content // calls of the last assistant still unanswered
	answered := map[string]bool{}
	flush := func() {
		for _, c := range pendingIDs {
			if !answered[c.ID] {
				out.add(llm.Message{
					Role:       llm.RoleToolResult,
					ToolCallID: c.ID,
					ToolName:   c.Name,
					Content:    []llm.Content{llm.TextBlock(NoResultText)},
					IsError:    true,
				})
			}
		}
		pendingIDs = nil
		clear(answered)
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleAssistant:
			if m.StopReason == llm.StopError || m.StopReason == llm.StopAborted {
				out.drop()
				continue
			}
			flush()
			out.keep(i)
			pendingIDs = m.ToolCalls()
		case llm.RoleToolResult:
			if !isPending(pendingIDs, m.ToolCallID) || answered[m.ToolCallID] {
				out.drop()
				continue
			}
			answered[m.ToolCallID] = true
			out.keep(i)
		default:
			flush()
			out.keep(i)
		}
	}
	flush()
	return out.result()
}

// transcript builds RepairTranscript's output copy-on-write: while every
// message so far is kept in order, nothing is copied.
type transcript struct {
	in  []llm.Message
	n   int           // leading messages of in kept so far, while out is nil
	out []llm.Message // the output once it differs from in
}

func (t *transcript) keep(i int) {
	if t.out == nil {
		t.n = i + 1
		return
	}
	t.out = append(t.out, t.in[i])
}

func (t *transcript) add(m llm.Message) {
	t.differ()
	t.out = append(t.out, m)
}

func (t *transcript) drop() { t.differ() }

// differ starts the copy with the messages kept so far.
func (t *transcript) differ() {
	if t.out == nil {
		t.out = append(make([]llm.Message, 0, len(t.in)+1), t.in[:t.n]...)
	}
}

func (t *transcript) result() []llm.Message {
	if t.out == nil {
		return t.in[:t.n]
	}
	return t.out
}

func isPending(calls []llm.Content, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}
