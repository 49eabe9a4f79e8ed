package transform

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/pibot/pibot/llm"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestGolden(t *testing.T) {
	in, err := os.ReadFile("testdata/conversation.json")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(in, &msgs); err != nil {
		t.Fatal(err)
	}
	anthropicNorm := func(id string) string { return SanitizeID(id, 64) }
	tests := []struct {
		name   string
		target llm.ModelInfo
		norm   func(string) string
	}{
		{"anthropic_text_only", llm.ModelInfo{Provider: "anthropic", API: "anthropic-messages", ID: "claude-sonnet-4-5", Input: []string{"text"}}, anthropicNorm},
		{"openai_images", llm.ModelInfo{Provider: "openai", API: "openai-responses", ID: "gpt-5", Input: []string{"text", "image"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := json.Marshal(msgs)
			out := Messages(msgs, tt.target, tt.norm)
			after, _ := json.Marshal(msgs)
			if !bytes.Equal(before, after) {
				t.Error("input messages were modified")
			}
			got, err := json.MarshalIndent(out, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("mismatch with %s (run with -update to accept):\n%s", path, got)
			}
		})
	}
}

func TestSanitizeID(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"call_1|fc_1", 64, "call_1_fc_1"},
		{"abc-DEF_09", 64, "abc-DEF_09"},
		{"a.b/c", 3, "a_b"},
	}
	for _, tt := range tests {
		if got := SanitizeID(tt.in, tt.max); got != tt.want {
			t.Errorf("SanitizeID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
