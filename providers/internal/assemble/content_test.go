package assemble

import (
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
)

// TestBlocks drives the content blocks through scripts of calls and checks
// the events sent and the final message.
func TestBlocks(t *testing.T) {
	cases := []struct {
		name   string
		script func(b *Builder)
		types  string // the events after start, space separated
		text   string // the final message's text
		args   string // the final arguments of the first block, a tool call
	}{
		{"text grows across deltas", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.TextStart()
			bs.Delta(i, "a")
			bs.Delta(i, "b")
			bs.End(i)
			b.Done(llm.StopStop)
		}, "text_start text_delta text_delta text_end done", "ab", ""},
		{"a delta to a block not open is ignored", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.TextStart()
			bs.End(i)
			bs.Delta(i, "x")
			bs.Delta(i+1, "y")
			b.Done(llm.StopStop)
		}, "text_start text_end done", "", ""},
		{"ending a closed block sends nothing", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.ThinkingStart()
			bs.End(i)
			bs.End(i)
			b.Done(llm.StopStop)
		}, "thinking_start thinking_end done", "", ""},
		{"valid arguments are kept as sent, trimmed", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.ToolCallStart("c", "bash")
			bs.Delta(i, ` {"a": `)
			bs.Delta(i, `1} `)
			bs.End(i)
			b.Done(llm.StopToolUse)
		}, "toolcall_start toolcall_delta toolcall_delta toolcall_end done", "", `{"a": 1}`},
		{"cut arguments are repaired at the end", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.ToolCallStart("c", "bash")
			bs.Delta(i, `{"a":"x`)
			bs.End(i)
			b.Done(llm.StopToolUse)
		}, "toolcall_start toolcall_delta toolcall_end done", "", `{"a":"x"}`},
		{"done ends the open blocks in order", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.ToolCallStart("c", "bash")
			bs.Delta(i, `{}`)
			j, _ := bs.TextStart()
			bs.Delta(j, "t")
			b.Done(llm.StopToolUse)
		}, "toolcall_start toolcall_delta text_start text_delta toolcall_end text_end done", "t", `{}`},
		{"a failure sends no end events", func(b *Builder) {
			bs := b.Blocks()
			i, _ := bs.TextStart()
			bs.Delta(i, "t")
			b.Fail(llm.StopError, "boom")
			bs.End(i)
		}, "text_start text_delta error", "t", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var types []string
			b := New(llm.ModelInfo{}, func(e llm.Event) bool { types = append(types, string(e.Type)); return true }, nil)
			b.Start()
			c.script(b)
			if got := strings.Join(types[1:], " "); got != c.types {
				t.Errorf("events = %s, want %s", got, c.types)
			}
			m := b.Message()
			if m.Text() != c.text {
				t.Errorf("text = %q, want %q", m.Text(), c.text)
			}
			if c.args != "" && string(m.Content[0].Arguments) != c.args {
				t.Errorf("arguments = %s, want %s", m.Content[0].Arguments, c.args)
			}
		})
	}
}
