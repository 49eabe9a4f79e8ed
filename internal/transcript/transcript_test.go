package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// branchy is a session with a tool call and two branches after the first
// answer; the second user message carries markup that must stay text.
func branchy(t *testing.T) (*session.Session, map[string]string) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := session.CreateFile(t.TempDir(), session.Header{ID: session.NewSessionID(now), Timestamp: session.Timestamp(now)},
		session.Entry{Type: session.TypeModelChange, Provider: "f", ModelID: "m"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ids := map[string]string{}
	add := func(name, parent string, m llm.Message) {
		t.Helper()
		e, err := s.Append(session.Entry{Type: session.TypeMessage, ParentID: parent, Message: &m}, session.SyncAlways)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = e.ID
	}
	add("u1", s.Tree().Leaf(), llm.UserText("list the files", 1))
	add("call", ids["u1"], llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{
		{Type: llm.ContentText, Text: "Looking."},
		{Type: llm.ContentToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)},
	}})
	add("out", ids["call"], llm.Message{Role: llm.RoleToolResult, ToolCallID: "c1", ToolName: "bash",
		Content: []llm.Content{llm.TextBlock("a.go\n```\nb.go")}})
	add("a1", ids["out"], llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("Two files.")}})
	add("u2", ids["a1"], llm.UserText("<script>alert(1)</script> first way", 2))
	add("u3", ids["a1"], llm.UserText("second way", 3))
	return s, ids
}

func TestMarkdown(t *testing.T) {
	s, ids := branchy(t)
	var b bytes.Buffer
	if err := Markdown(&b, s.Tree(), ids["u2"]); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{"# list the files\n", "## You\n\nlist the files\n", "**Tool call** `bash`\n\n```json\n{\"command\":\"ls\"}\n```\n",
		"**Output of** `bash`\n\n````\na.go\n```\nb.go\n````\n", "## Assistant\n\nTwo files.\n", "first way"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "second way") {
		t.Error("markdown of one branch shows the other")
	}
	if err := Markdown(&b, s.Tree(), "nope"); err == nil {
		t.Error("unknown leaf accepted")
	}
}

func TestHTML(t *testing.T) {
	s, _ := branchy(t)
	var b bytes.Buffer
	if err := HTML(&b, s.Tree()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<!DOCTYPE html>", "<style>", "Branch 1 of 2: &lt;script&gt;", "Branch 2 of 2: second way",
		"<details class=\"call\"><summary>🔧 bash <code>{&#34;command&#34;:&#34;ls&#34;}</code>", "◀ pi resumes here", "</html>\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "src=") || strings.Contains(page, "href=") {
		t.Error("page runs script or loads another file")
	}
	if o, c := strings.Count(page, "<details"), strings.Count(page, "</details>"); o != c || o < 4 {
		t.Errorf("%d <details> opened, %d closed", o, c)
	}
	if o, c := strings.Count(page, "<div"), strings.Count(page, "</div>"); o != c {
		t.Errorf("%d <div> opened, %d closed", o, c)
	}
}
