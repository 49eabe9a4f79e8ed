package compaction

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"

	"github.com/pibot/pibot/llm"
)

// imageTokens is pi's flat estimate for one image block.
const imageTokens = 4800

// ShouldCompact reports pi's threshold rule: compaction is enabled and the
// context uses more than contextWindow - ReserveTokens tokens.
func ShouldCompact(contextTokens, contextWindow int64, s Settings) bool {
	return s.Enabled && contextTokens > contextWindow-s.ReserveTokens
}

// jsLen is the length of s in UTF-16 code units, as JavaScript counts it.
func jsLen(s string) int64 {
	var n int64
	for _, r := range s {
		n += int64(utf16.RuneLen(r))
	}
	return n
}

// EstimateTokens estimates the tokens of a message like pi: characters / 4,
// rounded up, counting text, thinking, tool call names and arguments,
// summaries and bash command/output, and 4800 tokens per image in tool
// results and custom messages.
func EstimateTokens(m llm.Message) int64 {
	var chars int64
	switch m.Role {
	case llm.RoleUser:
		for _, c := range m.Content {
			if c.Type == llm.ContentText {
				chars += jsLen(c.Text)
			}
		}
	case llm.RoleAssistant:
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				chars += jsLen(c.Text)
			case llm.ContentThinking:
				chars += jsLen(c.Thinking)
			case llm.ContentToolCall:
				chars += jsLen(c.Name) + jsLen(compactJSON(c.Arguments))
			}
		}
	case llm.RoleToolResult, llm.RoleCustom:
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				chars += jsLen(c.Text)
			case llm.ContentImage:
				chars += imageTokens * 4
			}
		}
	case llm.RoleBashExecution:
		chars = jsLen(m.Command) + jsLen(m.Output)
	case llm.RoleBranchSummary, llm.RoleCompactionSummary:
		chars = jsLen(m.Summary)
	default:
		return 0
	}
	return (chars + 3) / 4
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// usable reports whether an assistant message carries usage that counts
// for the context size (not aborted, not an error, non-zero).
func usable(m llm.Message) bool {
	return m.Role == llm.RoleAssistant && m.StopReason != llm.StopAborted && m.StopReason != llm.StopError && m.Usage.Tokens() > 0
}

// EstimateContextTokens estimates the context size of msgs like pi: the
// usage of the last valid assistant message plus estimates of every message
// after it, or estimates of all messages when none has usage.
func EstimateContextTokens(msgs []llm.Message) int64 {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if usable(msgs[i]) {
			last = i
			break
		}
	}
	var total int64
	if last >= 0 {
		total = msgs[last].Usage.Tokens()
	}
	for _, m := range msgs[last+1:] {
		total += EstimateTokens(m)
	}
	return total
}
