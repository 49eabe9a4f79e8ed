package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// transcript builds an OpenAI-style chunk stream of n text deltas.
func transcript(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		chunk := map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]string{"content": strings.Repeat("tok", 1+i%3)}, "finish_reason": nil}}}
		data, _ := json.Marshal(chunk)
		b.WriteString("data: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkReader measures raw SSE framing throughput.
func BenchmarkReader(b *testing.B) {
	const n = 1000
	data := transcript(n)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	events := 0
	for b.Loop() {
		r := NewReader(bytes.NewReader(data))
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			events++
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// TestReaderAllocsPerEvent keeps the framing allocation-free per event
// (the Reader's buffers are allocated once per stream).
func TestReaderAllocsPerEvent(t *testing.T) {
	data := transcript(1000)
	allocs := testing.AllocsPerRun(5, func() {
		r := NewReader(bytes.NewReader(data))
		for {
			if _, err := r.Next(); err != nil {
				return
			}
		}
	})
	if perEvent := allocs / 1001; perEvent > 0.05 {
		t.Errorf("allocs per event = %.3f, want ~0", perEvent)
	}
}
