package session

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

func TestIDsAndNames(t *testing.T) {
	now := time.Date(2026, 11, 29, 21, 0, 37, 621e6, time.UTC)
	id := NewSessionID(now)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("not a UUIDv7: %s", id)
	}
	if ms, err := strconv.ParseInt(strings.ReplaceAll(id, "-", "")[:12], 16, 64); err != nil || ms != now.UnixMilli() {
		t.Errorf("timestamp bits of %s = %d, want %d", id, ms, now.UnixMilli())
	}
	if got := FileName(Timestamp(now), id); got != "2026-11-29T21-00-37-621Z_"+id+".jsonl" {
		t.Errorf("FileName = %s", got)
	}
	for _, tc := range []struct {
		name, ts, id string
		ok           bool
	}{
		{FileName(Timestamp(now), id), Timestamp(now), id, true},
		{"/data/sessions/telegram-1/" + FileName(Timestamp(now), id), Timestamp(now), id, true},
		{"2026-11-29T21-00-37-621Z_" + id + ".json", "", "", false},
		{"2026-11-29T21-00-37-621Z.jsonl", "", "", false},
		{"2026-11-29T21-00-37-621Z_.jsonl", "", "", false},
		{"2026-11-29T25-00-37-621Z_x.jsonl", "", "", false},
		{"2026-11-29X21-00-37-621Z_x.jsonl", "", "", false},
		{"notes.jsonl", "", "", false},
	} {
		ts, gotID, ok := ParseFileName(tc.name)
		if ts != tc.ts || gotID != tc.id || ok != tc.ok {
			t.Errorf("ParseFileName(%q) = %q, %q, %v; want %q, %q, %v", tc.name, ts, gotID, ok, tc.ts, tc.id, tc.ok)
		}
	}
	seen := map[string]bool{}
	for range 1000 {
		e := newEntryID(func(s string) bool { return seen[s] })
		if len(e) != 8 || seen[e] {
			t.Fatalf("entry id %q", e)
		}
		seen[e] = true
	}
	tests := []struct{ space, want string }{
		{"telegram:123", "telegram-123"},
		{"../../etc", "-..-etc"},
		{"", "default"},
		{"slack/T1/C2", "slack-T1-C2"},
	}
	for _, tc := range tests {
		if got := Dir("/d", tc.space); got != filepath.Join("/d", "sessions", tc.want) {
			t.Errorf("Dir(%q) = %s", tc.space, got)
		}
	}
}

func TestRepairAndTreeText(t *testing.T) {
	p := copyVector(t, "torn-tail")
	rep, err := Repair(p, true)
	if err != nil || rep.TailBytes == 0 || rep.TailTruncated {
		t.Fatalf("dry run: %+v %v", rep, err)
	}
	rep, err = Repair(p, false)
	if err != nil || !rep.TailTruncated {
		t.Fatalf("repair: %+v %v", rep, err)
	}
	rep, err = Repair(p, false)
	if err != nil || !rep.Clean() {
		t.Fatalf("second repair: %+v %v", rep, err)
	}
	s, err := OpenFile(copyVector(t, "agent-tree"), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := TreeText(&b, s.Tree(), TreeOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Count(out, "\n") != s.Tree().Len() || !strings.Contains(out, "├─ ") || !strings.Contains(out, s.Tree().Leaf()+" ") {
		t.Fatalf("tree text:\n%s", out)
	}
}

func TestEntryEncoding(t *testing.T) {
	m := llm.UserText("a <b> & c", 1)
	e := Entry{Type: TypeMessage, ID: "00000001", Timestamp: "2026-01-01T00:00:00.000Z", Message: &m, Pibot: &Meta{Loc: "l"}, Fence: 3}
	b, err := marshalNoEscape(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"message","id":"00000001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","pibot":{"loc":"l"},"fence":3,"message":{"role":"user","content":[{"type":"text","text":"a <b> & c"}],"timestamp":1}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	back, err := decodeEntry(b)
	if err != nil || back.Message.Text() != "a <b> & c" || back.Pibot.Loc != "l" || back.Fence != 3 {
		t.Fatalf("decode: %+v %v", back, err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
}

// TestRawFieldsCompactedIntoOneLine: a message whose raw fields hold
// whitespace and newlines is still written as one compact line.
func TestRawFieldsCompactedIntoOneLine(t *testing.T) {
	st := NewMemStorage()
	s, err := Create(st, "/c", Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := llm.Message{Role: llm.RoleAssistant, StopReason: llm.StopToolUse, Provider: "p", Model: "m", Timestamp: 1,
		Content: []llm.Content{{Type: llm.ContentToolCall, ID: "c1", Name: "bash", Arguments: json.RawMessage("{\n  \"command\": \"ls <dir> & \\\"x\\\"\"\n}")}}}
	if _, err := s.Append(Entry{Type: TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, SyncAlways); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := st.ReadFile(s.Path())
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), b)
	}
	if !bytes.Contains(lines[2], []byte(`"arguments":{"command":"ls <dir> & \"x\""}`)) {
		t.Fatalf("tool call line not compact or escaped differently: %s", lines[2])
	}
}
