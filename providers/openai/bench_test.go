package openai

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/providertest"
)

func benchTranscript(n int) string {
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
	return b.String()
}

// BenchmarkCompletionsStream measures the SDK-based streaming path end to
// end against an httptest server (request, SSE decoding, chunk decoding,
// event building): events/s and allocations per emitted event.
func BenchmarkCompletionsStream(b *testing.B) {
	const n = 1000
	resp := providertest.Response{Body: benchTranscript(n)}
	srv := providertest.NewServer(b, resp)
	m := NewCompletions(Config{Info: llm.ModelInfo{ID: "gpt-4o-mini", Provider: "bench"}, BaseURL: srv.URL + "/v1", HTTP: srv.Client()})
	req := llm.Request{Messages: []llm.Message{llm.UserText("hi", 1)}}
	b.SetBytes(int64(len(resp.Body)))
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	events := 0
	for b.Loop() {
		var last llm.Event
		for e := range m.Stream(b.Context(), req) {
			events++
			last = e
		}
		if last.Type != llm.EventDone {
			b.Fatalf("stream ended with %s: %s", last.Type, last.Message.ErrorMessage)
		}
	}
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(events), "allocs/event")
}
