package compaction

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pibot/pibot/llm"
)

// toolResultLimit is how many characters of a tool result the serialized
// conversation keeps.
const toolResultLimit = 2000

// SerializeConversation renders model messages as the plain text pi puts
// inside <conversation> tags: "[User]: ...", "[Assistant thinking]: ...",
// "[Assistant]: ...", "[Assistant tool calls]: name(k=<json>, ...)" and
// "[Tool result]: ..." (truncated to 2000 characters), joined by blank
// lines. Images are left out.
func SerializeConversation(msgs []llm.Message) string {
	var parts []string
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleUser:
			if t := llm.JoinText(m.Content, ""); t != "" {
				parts = append(parts, "[User]: "+t)
			}
		case llm.RoleAssistant:
			var text, thinking, calls []string
			for _, c := range m.Content {
				switch c.Type {
				case llm.ContentText:
					text = append(text, c.Text)
				case llm.ContentThinking:
					thinking = append(thinking, c.Thinking)
				case llm.ContentToolCall:
					calls = append(calls, c.Name+"("+formatArgs(c.Arguments)+")")
				}
			}
			if len(thinking) > 0 {
				parts = append(parts, "[Assistant thinking]: "+strings.Join(thinking, "\n"))
			}
			if len(text) > 0 {
				parts = append(parts, "[Assistant]: "+strings.Join(text, "\n"))
			}
			if len(calls) > 0 {
				parts = append(parts, "[Assistant tool calls]: "+strings.Join(calls, "; "))
			}
		case llm.RoleToolResult:
			if t := llm.JoinText(m.Content, ""); t != "" {
				parts = append(parts, "[Tool result]: "+truncate(t, toolResultLimit))
			}
		}
	}
	return strings.Join(parts, "\n\n")
}

// formatArgs renders tool arguments as k=<json>, in the model's key order.
func formatArgs(raw json.RawMessage) string {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	var out []string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		k, _ := kt.(string)
		out = append(out, k+"="+compactJSON(v))
	}
	return strings.Join(out, ", ")
}

// truncate cuts s to limit UTF-16 units like pi's truncateForSummary.
func truncate(s string, limit int64) string {
	total := jsLen(s)
	if total <= limit {
		return s
	}
	var n int64
	var b strings.Builder
	for _, r := range s {
		l := jsLen(string(r))
		if n+l > limit {
			break
		}
		n += l
		b.WriteRune(r)
	}
	return fmt.Sprintf("%s\n\n[... %d more characters truncated]", b.String(), total-limit)
}

// complete runs one non-streaming summarization call and returns the text
// blocks of the answer joined by newlines.
func complete(ctx context.Context, model llm.Model, prompt string, maxTokens int64, thinking llm.ThinkingLevel) (string, llm.StopReason, error) {
	req := llm.Request{
		SystemPrompt: SystemPrompt,
		Messages:     []llm.Message{{Role: llm.RoleUser, Content: []llm.Content{llm.TextBlock(prompt)}}},
		MaxTokens:    maxTokens,
	}
	if model.Info().Reasoning && thinking != "" && thinking != llm.ThinkingOff {
		req.Thinking = thinking
	}
	var final *llm.Message
	for ev := range model.Stream(ctx, req) {
		if (ev.Type == llm.EventDone || ev.Type == llm.EventError) && ev.Message != nil {
			m := *ev.Message
			final = &m
		}
	}
	if final == nil {
		if err := ctx.Err(); err != nil {
			return "", llm.StopAborted, fmt.Errorf("compaction: summarize: %w", err)
		}
		return "", llm.StopError, fmt.Errorf("compaction: summarize: model stream ended without a final message")
	}
	switch final.StopReason {
	case llm.StopError:
		msg := final.ErrorMessage
		if msg == "" {
			msg = "Unknown error"
		}
		return "", final.StopReason, piError("Summarization failed: " + msg)
	case llm.StopAborted:
		return "", final.StopReason, fmt.Errorf("compaction: summarize: %w", context.Canceled)
	}
	return llm.JoinText(final.Content, "\n"), final.StopReason, nil
}

// SummaryPrompt returns the user prompt of a history summary: the
// serialized conversation, the previous summary if any, and the initial or
// update instructions with optional additional focus.
func SummaryPrompt(msgs []llm.Message, previousSummary, customInstructions string) string {
	base := initialPrompt
	if previousSummary != "" {
		base = updatePrompt
	}
	if customInstructions != "" {
		base += "\n\nAdditional focus: " + customInstructions
	}
	p := "<conversation>\n" + SerializeConversation(llm.ConvertToLLM(msgs)) + "\n</conversation>\n\n"
	if previousSummary != "" {
		p += "<previous-summary>\n" + previousSummary + "\n</previous-summary>\n\n"
	}
	return p + base
}

// TurnPrefixPrompt returns the user prompt summarizing a split turn's
// prefix.
func TurnPrefixPrompt(msgs []llm.Message) string {
	return "<conversation>\n" + SerializeConversation(llm.ConvertToLLM(msgs)) + "\n</conversation>\n\n" + turnPrefixPrompt
}

// Compact is pi's compact: it summarizes prep with model (history and, for
// a split turn, the turn prefix in parallel), appends the file lists and
// returns the result to store in a compaction entry.
func Compact(ctx context.Context, model llm.Model, prep *Preparation, customInstructions string, thinking llm.ThinkingLevel) (Result, error) {
	reserve := prep.Settings.ReserveTokens
	if reserve <= 0 {
		reserve = DefaultReserveTokens
	}
	history := func(ctx context.Context) (string, error) {
		s, _, err := complete(ctx, model, SummaryPrompt(prep.MessagesToSummarize, prep.PreviousSummary, customInstructions), reserve*8/10, thinking)
		return s, err
	}
	var summary string
	if prep.IsSplitTurn && len(prep.TurnPrefixMessages) > 0 {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type out struct {
			s   string
			err error
		}
		prefixCh := make(chan out, 1)
		go func() {
			s, _, err := complete(ctx, model, TurnPrefixPrompt(prep.TurnPrefixMessages), reserve*5/10, thinking)
			prefixCh <- out{s, err}
		}()
		hist := noPriorHistory
		var herr error
		if len(prep.MessagesToSummarize) > 0 {
			hist, herr = history(ctx)
			if herr != nil {
				cancel()
			}
		}
		prefix := <-prefixCh
		if herr != nil {
			return Result{}, herr
		}
		if prefix.err != nil {
			return Result{}, prefix.err
		}
		summary = hist + splitTurnSeparator + prefix.s
	} else {
		var err error
		if summary, err = history(ctx); err != nil {
			return Result{}, err
		}
	}
	files := prep.Files
	if files.Read == nil {
		files = newFileOps()
	}
	d := files.Lists()
	return Result{
		Summary:          summary + fileTags(d),
		FirstKeptEntryID: prep.FirstKeptEntryID,
		TokensBefore:     prep.TokensBefore,
		Details:          d,
	}, nil
}
