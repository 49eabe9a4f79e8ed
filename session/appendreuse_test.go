package session_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// TestAppendedEntriesIndexAsReopened: the tree indexes an appended line as
// a reopened file does, whatever its strings need in JSON (quotes,
// escapes, HTML characters, invalid UTF-8, which the encoder replaces),
// and lines written out between appends (SyncWritten reuses the written
// buffer) reach the file whole and in order.
func TestAppendedEntriesIndexAsReopened(t *testing.T) {
	st := session.NewMemStorage()
	s, err := session.Create(st, "/d", session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"},
		session.Options{DeferCreate: true, GroupWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	odd := []string{"plain", `with "quotes" and \ back`, "<html>&amp;</html>", "tab\tnew\nline", "bad \xff utf8", "ünïcödé ✓", strings.Repeat("long ", 5000)}
	parent := s.Tree().Leaf()
	for i, text := range odd {
		m := llm.UserText(text, int64(i))
		if i%2 == 1 {
			m = llm.Message{Role: llm.RoleAssistant, Provider: odd[(i+1)%len(odd)], Model: text, Content: []llm.Content{{Type: llm.ContentText, Text: text}}}
		}
		sync := session.SyncGrouped
		if i%3 == 0 {
			sync = session.SyncWritten
		}
		e, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: parent, Pibot: &session.Meta{Loc: text, Msg: odd[len(odd)-1-i], From: text}}, sync)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(session.Entry{Type: session.TypeCustom, CustomType: "x", ParentID: e.ID, Pibot: &session.Meta{Loc: text}}, session.SyncWritten); err != nil {
			t.Fatal(err)
		}
		parent = e.ID
	}
	live := s.Tree().Entries()
	heads := s.Tree().Heads()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := session.Open(st, s.Path(), session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if r := re.Report(); !r.Clean() {
		t.Fatalf("the written file needed repair: %+v", r)
	}
	reopened := re.Tree().Entries()
	if len(reopened) != len(live) {
		t.Fatalf("%d entries reopened, %d appended", len(reopened), len(live))
	}
	for i := range live {
		a, b := live[i], reopened[i]
		if a.ID != b.ID || a.ParentID != b.ParentID || a.Timestamp != b.Timestamp || a.Type != b.Type || !reflect.DeepEqual(a.Pibot, b.Pibot) || string(a.Raw) != string(b.Raw) {
			t.Fatalf("entry %d as appended %+v\nreopened %+v", i, a, b)
		}
	}
	if got := re.Tree().Heads(); !reflect.DeepEqual(got, heads) {
		t.Fatalf("heads as appended %q, reopened %q", heads, got)
	}
}
