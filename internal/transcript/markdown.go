// Package transcript renders a session for people to read: one branch as
// Markdown, or the whole tree as a single self-contained HTML page with
// collapsible branches and tool calls (`pibot session export --format`).
// pibot's own bookkeeping entries (custom "pibot.*") are left out.
package transcript

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// Markdown writes the branch ending at leaf ("" for pi's default leaf) as
// Markdown: a heading per message, tool calls and outputs in fenced
// blocks, thinking in a collapsed <details> block.
func Markdown(w io.Writer, s *session.Tree, leaf string) error {
	if leaf == "" {
		leaf = s.Leaf()
	}
	branch, err := s.Branch(leaf)
	if err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s\n\n", title(s))
	h := s.Header()
	fmt.Fprintf(bw, "Session `%s`, started %s", h.ID, h.Timestamp)
	if h.Cwd != "" {
		fmt.Fprintf(bw, " in `%s`", h.Cwd)
	}
	bw.WriteString(".\n")
	for _, e := range branch {
		markdownEntry(bw, e)
	}
	return bw.Flush()
}

// title is the session's name, else its first user message, else its id.
func title(s *session.Tree) string {
	if n := s.Name(); n != "" {
		return oneLine(n, 80)
	}
	for _, e := range s.Entries() {
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser {
			if t := oneLine(e.Message.Text(), 80); t != "" {
				return t
			}
		}
	}
	return "Session " + s.Header().ID
}

func markdownEntry(w *bufio.Writer, e session.Entry) {
	switch e.Type {
	case session.TypeMessage:
		if e.Message != nil {
			markdownMessage(w, *e.Message)
		}
	case session.TypeCustomMessage:
		if m, ok := customMessage(e); ok {
			markdownMessage(w, m)
		}
	case session.TypeCompaction:
		fmt.Fprintf(w, "\n## Summary of the conversation before\n\n%s\n", e.Summary)
	case session.TypeBranchSummary:
		fmt.Fprintf(w, "\n## Summary of another branch\n\n%s\n", e.Summary)
	case session.TypeModelChange:
		fmt.Fprintf(w, "\n*Model: %s/%s*\n", e.Provider, e.ModelID)
	case session.TypeThinkingLevelChange:
		fmt.Fprintf(w, "\n*Thinking: %s*\n", e.ThinkingLevel)
	}
}

func markdownMessage(w *bufio.Writer, m llm.Message) {
	switch m.Role {
	case llm.RoleUser:
		fmt.Fprintf(w, "\n## You\n\n%s\n", m.Text())
	case llm.RoleAssistant:
		w.WriteString("\n## Assistant\n")
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				fmt.Fprintf(w, "\n%s\n", c.Text)
			case llm.ContentThinking:
				if !c.Redacted && strings.TrimSpace(c.Thinking) != "" {
					fmt.Fprintf(w, "\n<details><summary>Thinking</summary>\n\n%s\n\n</details>\n", c.Thinking)
				}
			case llm.ContentToolCall:
				fmt.Fprintf(w, "\n**Tool call** `%s`\n\n", c.Name)
				fenced(w, "json", string(c.Arguments))
			}
		}
		if m.StopReason == llm.StopError && m.ErrorMessage != "" {
			fmt.Fprintf(w, "\n**Error:** %s\n", m.ErrorMessage)
		}
	case llm.RoleToolResult:
		fail := ""
		if m.IsError {
			fail = " (failed)"
		}
		fmt.Fprintf(w, "\n**Output of** `%s`%s\n\n", m.ToolName, fail)
		fenced(w, "", m.Text())
	case llm.RoleBashExecution:
		fmt.Fprintf(w, "\n**$** `%s`\n\n", m.Command)
		fenced(w, "", m.Output)
	case llm.RoleCustom:
		if m.Display {
			fmt.Fprintf(w, "\n%s\n", m.Text())
		}
	case llm.RoleCompactionSummary, llm.RoleBranchSummary:
		fmt.Fprintf(w, "\n## Summary\n\n%s\n", m.Summary)
	}
}

// customMessage is the message pi makes of a custom_message entry (its
// content a string or content blocks); false when it cannot be read.
func customMessage(e session.Entry) (llm.Message, bool) {
	raw, err := json.Marshal(struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Display bool            `json:"display"`
	}{string(llm.RoleCustom), e.Content, e.Display})
	var m llm.Message
	if err != nil || len(e.Content) == 0 || json.Unmarshal(raw, &m) != nil {
		return llm.Message{}, false
	}
	m.CustomType = e.CustomType
	return m, true
}

// fenced writes text in a fenced code block whose fence no line of text
// can close.
func fenced(w *bufio.Writer, lang, text string) {
	fence := "```"
	for strings.Contains(text, fence) {
		fence += "`"
	}
	fmt.Fprintf(w, "%s%s\n%s\n%s\n", fence, lang, strings.TrimRight(text, "\n"), fence)
}

// oneLine collapses whitespace and shortens s to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
