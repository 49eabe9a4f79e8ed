package anthropic

import (
	"errors"
	"strings"
	"testing"
)

// TestEvents covers the framing of the event stream: what is skipped,
// how data lines join, and how a stream ends.
func TestEvents(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		types  string // the decoded events' types
		texts  string // their text deltas
		err    string // "" for a clean end
	}{
		{"crlf, comments, ping, unnamed",
			": comment\r\nevent: ping\r\ndata: {\"type\":\"ping\"}\r\n\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n" +
				"event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\r\n\r\n",
			"content_block_delta", "a", ""},
		{"data over two lines",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\ndata: \"delta\":{\"type\":\"text_delta\",\"text\":\"b\"}}\n\n",
			"content_block_delta", "b", ""},
		{"last event without a blank line",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n", "", "", ""},
		{"named event without data", "event: message_stop\n\n", "", "", ""},
		{"bad json", "event: message_start\ndata: {\"type\":\n\n", "", "", "unexpected end of JSON input"},
		{"error event", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}\n\n", "", "", "api_error: Internal"},
		{"error event not json", "event: error\ndata: boom\n\n", "", "", "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEvents(strings.NewReader(tt.stream))
			var types, texts []string
			for e.next() {
				types = append(types, e.cur.Type)
				texts = append(texts, e.cur.Delta.Text)
			}
			if got := strings.Join(types, " "); got != tt.types {
				t.Errorf("types = %q, want %q", got, tt.types)
			}
			if got := strings.Join(texts, ""); got != tt.texts {
				t.Errorf("texts = %q, want %q", got, tt.texts)
			}
			switch {
			case tt.err == "" && e.err != nil:
				t.Errorf("err = %v, want none", e.err)
			case tt.err != "" && (e.err == nil || !strings.Contains(e.err.Error(), tt.err)):
				t.Errorf("err = %v, want %q", e.err, tt.err)
			}
		})
	}
}

func TestStreamFailure(t *testing.T) {
	e := newEvents(strings.NewReader("event: x\ndata: {\"type\":1}\n\n"))
	for e.next() {
	}
	if got := streamFailure(e.err); !strings.HasPrefix(got, "bad stream event: ") {
		t.Errorf("undecodable event: %q", got)
	}
	if got := streamFailure(errors.New("connection reset")); got != "read stream: connection reset" {
		t.Errorf("broken connection: %q", got)
	}
	if got := streamFailure(newStreamError([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))); got != "overloaded_error: Overloaded" {
		t.Errorf("error event: %q", got)
	}
}
