package llm

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestContentsAsEncodingJSON: a message's content array is written as
// encoding/json (no HTML escaping) writes it, byte for byte: every block
// compacted, raw arguments and extra fields included; an invalid raw value
// is an error, as it is for the encoder.
func TestContentsAsEncodingJSON(t *testing.T) {
	tests := []struct {
		name    string
		content []Content
		wantErr bool
	}{
		{"empty", []Content{}, false},
		{"text with html and unicode", []Content{TextBlock("a <b> & \"c\" é \u2028 \n end")}, false},
		{"thinking and text", []Content{{Type: ContentThinking, Thinking: "hmm", ThinkingSignature: "sig"}, TextBlock("x")}, false},
		{"tool call with spaced arguments", []Content{{Type: ContentToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage("{ \"command\" : \"ls  -l\" ,\n \"n\": [1, 2] }")}}, false},
		{"image", []Content{ImageBlock("aGVsbG8=", "image/png")}, false},
		{"extra fields", []Content{{Type: ContentText, Text: "t", Extra: []Field{{Key: "cache", Value: json.RawMessage(`{ "ttl" : 5 }`)}}}}, false},
		{"invalid arguments", []Content{{Type: ContentToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":`)}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := Message{Role: RoleAssistant, Content: tc.content, Timestamp: 1}
			got, err := m.MarshalJSON()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("MarshalJSON = %s, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(tc.content); err != nil {
				t.Fatal(err)
			}
			field := append([]byte(`"content":`), bytes.TrimRight(want.Bytes(), "\n")...)
			if !bytes.Contains(got, append(field, ',')) {
				t.Errorf("MarshalJSON = %s\nwant it to contain %s", got, field)
			}
		})
	}
}
