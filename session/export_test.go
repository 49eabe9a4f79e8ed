package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
)

func TestExportRechainsTheBranch(t *testing.T) {
	dir := t.TempDir()
	s, err := CreateFile(dir, Header{Cwd: "/w"}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	root := s.Tree().Leaf()
	u := llm.UserText("hi <there>", 1)
	a, _ := s.Append(Entry{Type: TypeMessage, ParentID: root, Message: &u}, SyncAlways)
	lbl := "start"
	l, _ := s.Append(Entry{Type: TypeLabel, ParentID: a.ID, TargetID: a.ID, Label: &lbl}, SyncAlways)
	side := llm.UserText("other branch", 2)
	if _, err := s.Append(Entry{Type: TypeMessage, ParentID: root, Message: &side}, SyncAlways); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	out, err := Export(s.Tree(), l.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("exported %d lines, want header + 3", len(lines))
	}
	if lines[0]["id"] != s.Tree().Header().ID || lines[0]["timestamp"] != "2030-01-02T03:04:05.000Z" || lines[0]["parentSession"] != nil {
		t.Fatalf("header %v", lines[0])
	}
	prev := any(nil)
	for _, e := range lines[1:] {
		if e["parentId"] != prev {
			t.Fatalf("entry %v: parentId %v, want %v", e["id"], e["parentId"], prev)
		}
		prev = e["id"]
	}
	if strings.Contains(string(out), "other branch") {
		t.Fatal("export contains another branch")
	}
	if !strings.Contains(string(out), `"hi <there>"`) {
		t.Fatal("export escaped or changed the message text")
	}
}
