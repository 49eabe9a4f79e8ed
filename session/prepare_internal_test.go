package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pibot/pibot/llm"
)

// prepare writes each entry byte for byte as json.Encoder without HTML
// escaping writes it (what it did before it skipped the encoder's
// copies): HTML characters, non-ASCII text, data with spaces and
// indentation, every kind of entry.
func TestPrepareEncodesLikeTheEncoder(t *testing.T) {
	s, err := Create(NewMemStorage(), "/p", Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{Fence: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	label, name := "a <b> & c", "naïve \u2028 name"
	msg := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{
		llm.TextBlock("if a < b && c > d { return \"x\" } — ünïcödé\n\ttab"),
		{Type: llm.ContentToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage(`{ "command" : "ls -l <dir>" }`)},
	}, StopReason: llm.StopToolUse, Timestamp: 5}
	root := s.Tree().Leaf()
	for i, e := range []Entry{
		{Type: TypeMessage, ParentID: root, Message: &msg, Pibot: &Meta{Loc: "web:1", Msg: "m<1>", From: "u&1"}},
		{Type: TypeCustom, ParentID: root, CustomType: "pibot.reply", Data: json.RawMessage("{\n  \"refs\" : [ \"a\", \"<b>\" ],\n  \"state\": \"streaming\"\n}")},
		{Type: TypeCustomMessage, ParentID: root, CustomType: "note", Content: json.RawMessage(`"<i>hi</i>"`), Display: true, Details: json.RawMessage(`{"k": [1, 2]}`)},
		{Type: TypeLabel, ParentID: root, TargetID: root, Label: &label},
		{Type: TypeSessionInfo, ParentID: root, Name: &name},
		{Type: TypeCompaction, ParentID: root, Summary: "sum <mary>", FirstKeptEntryID: root, TokensBefore: 12},
		{Type: TypeThinkingLevelChange, ParentID: root, ThinkingLevel: "high"},
	} {
		line, err := s.prepare(&e)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&e); err != nil {
			t.Fatalf("entry %d: encoder: %v", i, err)
		}
		if !bytes.Equal(line, want.Bytes()) {
			t.Errorf("entry %d:\n got %s\nwant %s", i, line, want.Bytes())
		}
		if !bytes.Equal(e.Raw, bytes.TrimSuffix(line, []byte("\n"))) {
			t.Errorf("entry %d: Raw = %s", i, e.Raw)
		}
	}
	bad := Entry{Type: TypeCustom, ParentID: root, CustomType: "x", Data: json.RawMessage(`{"unclosed": `)}
	if _, err := s.prepare(&bad); err == nil {
		t.Error("an entry with invalid data was encoded")
	}
}

// TestPiMessagesEncodeAsPiWroteThem: every message pi wrote in the
// vectors, decoded and encoded again by pibot, has the keys pi wrote with
// the same bytes as values (text with escapes and non-ASCII, usage with
// float costs, tool calls, unknown keys).
func TestPiMessagesEncodeAsPiWroteThem(t *testing.T) {
	dir, m := loadVectors(t)
	n := 0
	for _, v := range m.Vectors {
		data, err := os.ReadFile(filepath.Join(dir, v.Name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			var e struct {
				Type    string
				Message json.RawMessage
			}
			if json.Unmarshal(line, &e) != nil || e.Type != TypeMessage || e.Message == nil {
				continue
			}
			if bytes.Contains(e.Message, []byte(`\ud`)) {
				continue // a lone surrogate, which Go decodes as U+FFFD
			}
			var msg llm.Message
			if err := json.Unmarshal(e.Message, &msg); err != nil {
				t.Fatalf("%s:%d: %v", v.Name, i+1, err)
			}
			got, err := msg.MarshalJSON()
			if err != nil {
				t.Fatalf("%s:%d: %v", v.Name, i+1, err)
			}
			// pibot's key order is its own for a few keys (responseId),
			// and it escapes U+2028 and U+2029 as encoding/json does:
			// otherwise each value must be pi's bytes.
			got = bytes.ReplaceAll(bytes.ReplaceAll(llm.CompactValid(got), []byte(`\u2028`), []byte("\u2028")), []byte(`\u2029`), []byte("\u2029"))
			gotKeys, wantKeys := topLevel(t, got), topLevel(t, e.Message)
			if !reflect.DeepEqual(gotKeys, wantKeys) {
				t.Errorf("%s:%d:\n got %s\nwant %s", v.Name, i+1, got, e.Message)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no message lines in the vectors")
	}
	t.Logf("%d messages", n)
}

// topLevel splits a JSON object into its keys and their values' bytes.
func topLevel(t *testing.T, obj []byte) map[string]string {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(obj, &fields); err != nil {
		t.Fatalf("%s: %v", obj, err)
	}
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		out[k] = string(v)
	}
	return out
}
