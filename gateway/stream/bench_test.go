package stream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
)

// BenchmarkStreamToken measures the CPU cost per streamed token of a
// 2,000-token reply (prose with code blocks, split into several messages),
// rendering, splitting and publishing every tick tokens.
func BenchmarkStreamToken(b *testing.B) {
	const tokens = 2000
	toks := make([]string, tokens)
	for i := range toks {
		switch {
		case i%400 == 100:
			toks[i] = "\n\n```go\n"
		case i%400 == 160:
			toks[i] = "\n```\n\n"
		case i%50 == 0:
			toks[i] = "\n\n"
		default:
			toks[i] = fmt.Sprintf(" tok%d", i%97)
		}
	}
	conv := chat.ConvRef{Platform: "test", Channel: "1", DM: true}
	caps := chat.Caps{Dialect: chat.DialectTelegram, MaxLen: 4096}
	for _, tick := range []int{1, 20} {
		b.Run(fmt.Sprintf("tick=%d", tick), func(b *testing.B) {
			ctx := b.Context()
			for b.Loop() {
				ad := chattest.New(chattest.WithCaps(caps, caps))
				c := New(ad, conv, Options{})
				c.ToolStart("1", "bash", json.RawMessage(`{"command":"go test ./..."}`))
				c.ToolEnd("1", false, "ok")
				var sb strings.Builder
				for i, tok := range toks {
					sb.WriteString(tok)
					c.SetText(sb.String())
					if i%tick == 0 {
						c.r.mu.Lock()
						md := c.out.surf.view(&c.r.doc, c.opts.Verbosity, c.now())
						c.r.mu.Unlock()
						c.out.surf.publish(ctx, md)
					}
				}
				if _, err := c.Finish(ctx, chat.Out{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
		})
	}
}

// BenchmarkSettled measures finding the settled head of a 12,000-character
// message (prose with emphasis, links, code spans, a code block and a
// table), as an append-only stream does on every tick; and of a hostile
// one, a paragraph of emphasis openers followed by closers of another kind.
func BenchmarkSettled(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 12000 {
		sb.WriteString("Some *prose* with a [link](https://example.com/a_b) and `code`, ")
		sb.WriteString("then a block:\n\n```go\nx := 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nMore words and ")
	}
	for name, md := range map[string]string{
		"prose":   sb.String(),
		"hostile": strings.Repeat("*a ", 2000) + strings.Repeat("b_ ", 2000),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				settled(md)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(md)), "ns/byte")
		})
	}
}
