package llm

import (
	"fmt"
	"strings"
)

// Texts pi uses when it turns summaries into user messages.
const (
	CompactionSummaryPrefix = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
	CompactionSummarySuffix = "\n</summary>"
	BranchSummaryPrefix     = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
	BranchSummarySuffix     = "</summary>"
)

// BashExecutionText is the user text pi sends for a bashExecution message.
func BashExecutionText(m Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Ran `%s`\n", m.Command)
	if m.Output != "" {
		b.WriteString("```\n" + m.Output + "\n```")
	} else {
		b.WriteString("(no output)")
	}
	if m.Cancelled {
		b.WriteString("\n\n(command cancelled)")
	} else if m.ExitCode != nil && *m.ExitCode != 0 {
		fmt.Fprintf(&b, "\n\nCommand exited with code %d", *m.ExitCode)
	}
	if m.Truncated && m.FullOutputPath != "" {
		fmt.Fprintf(&b, "\n\n[Output truncated. Full output: %s]", m.FullOutputPath)
	}
	return b.String()
}

// ConvertToLLM turns session messages into the messages a model sees, like
// pi's convertToLlm: coding-agent roles become user messages, user,
// assistant and toolResult pass through, unknown roles are dropped.
func ConvertToLLM(msgs []Message) []Message {
	return AppendConverted(make([]Message, 0, len(msgs)), msgs)
}

// AppendConverted appends msgs, converted as ConvertToLLM converts them,
// to out and returns the extended slice.
func AppendConverted(out, msgs []Message) []Message {
	for _, m := range msgs {
		switch m.Role {
		case RoleUser, RoleAssistant, RoleToolResult:
			out = append(out, m)
		case RoleBashExecution:
			if m.ExcludeFromContext != nil && *m.ExcludeFromContext {
				continue
			}
			out = append(out, UserText(BashExecutionText(m), m.Timestamp))
		case RoleCustom:
			out = append(out, Message{Role: RoleUser, Content: m.Content, Timestamp: m.Timestamp})
		case RoleBranchSummary:
			out = append(out, UserText(BranchSummaryPrefix+m.Summary+BranchSummarySuffix, m.Timestamp))
		case RoleCompactionSummary:
			out = append(out, UserText(CompactionSummaryPrefix+m.Summary+CompactionSummarySuffix, m.Timestamp))
		}
	}
	return out
}
