package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/internal/assemble"
)

func benchTranscript(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		chunk := map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": strings.Repeat("tok ", 1+i%3)}, "finish_reason": nil}}}
		data, _ := json.Marshal(chunk)
		b.WriteString("data: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkCompletionsStream measures SSE parsing plus chunk decoding and
// event building: events/s and allocations per emitted event.
func BenchmarkCompletionsStream(b *testing.B) {
	const n = 1000
	data := benchTranscript(n)
	m := NewCompletions(Config{Info: llm.ModelInfo{ID: "gpt-4o-mini", Provider: "bench"}})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	events := 0
	for b.Loop() {
		bl := assemble.New(m.info, func(llm.Event) bool { events++; return true }, nil)
		m.read(context.Background(), bl, bytes.NewReader(data))
	}
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(events), "allocs/event")
}
