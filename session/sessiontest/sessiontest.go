// Package sessiontest is a conformance suite for session.Storage
// implementations: Run drives the session package over a storage and checks
// the behaviour every implementation must share. FaultyStorage wraps one
// to fail its fsyncs on purpose.
package sessiontest

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// NewStorage returns a fresh storage and a directory inside it for a test.
type NewStorage func(t *testing.T) (session.Storage, string)

// Run runs the suite.
func Run(t *testing.T, newStorage NewStorage) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st session.Storage, dir string)
	}{
		{"CreateAppendReopen", testCreateAppendReopen},
		{"KeyOrder", testKeyOrder},
		{"HeadsAndMessageRefs", testHeads},
		{"TornTailRepaired", testTornTail},
		{"MiddleDamageReattached", testMiddleDamage},
		{"NotASessionRefused", testNotSession},
		{"Fencing", testFencing},
		{"StaleFenceIgnored", testStaleFence},
		{"ForkKeepsLabels", testFork},
		{"CloneKeepsUnknownFields", testClone},
		{"GroupedFlushAndList", testGroupedList},
		{"DeferredCreateOnFlush", testDeferredFlush},
		{"DeferredCreateOnClose", testDeferredClose},
		{"DeferredCreateByGroupCommit", testDeferredGroup},
		{"DeferredCreateCollision", testDeferredCollision},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, dir := newStorage(t)
			tc.fn(t, st, dir)
		})
	}
}

func user(text string) session.Entry {
	m := llm.UserText(text, 1700000000000)
	return session.Entry{Type: session.TypeMessage, Message: &m}
}

func assistant(text string) session.Entry {
	m := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock(text)}, API: "faux", Provider: "faux", Model: "faux-1", StopReason: llm.StopStop, Timestamp: 1700000000001}
	return session.Entry{Type: session.TypeMessage, Message: &m}
}

func create(t *testing.T, st session.Storage, dir string, opts session.Options) *session.Session {
	t.Helper()
	s, err := session.Create(st, dir, session.Header{Cwd: "/w"}, session.Entry{Type: session.TypeModelChange, Provider: "faux", ModelID: "faux-1"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func appendE(t *testing.T, s *session.Session, e session.Entry, parent string) session.Entry {
	t.Helper()
	e.ParentID = parent
	out, err := s.Append(e, session.SyncAlways)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func reopen(t *testing.T, st session.Storage, s *session.Session, opts session.Options) *session.Session {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := session.Open(st, s.Path(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func testCreateAppendReopen(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	if !strings.HasSuffix(s.Path(), "_"+s.Tree().Header().ID+".jsonl") || len(s.Tree().Header().ID) != 36 || s.Tree().Header().ID[14] != '7' {
		t.Fatalf("path %s / id %s: want <ts>_<uuidv7>.jsonl", s.Path(), s.Tree().Header().ID)
	}
	root := s.Tree().Leaf()
	u := appendE(t, s, user("hi"), root)
	a := appendE(t, s, assistant("hello"), u.ID)
	if len(u.ID) != 8 || u.Timestamp == "" {
		t.Fatalf("id %q ts %q", u.ID, u.Timestamp)
	}
	r := reopen(t, st, s, session.Options{})
	if r.Tree().Leaf() != a.ID || r.Tree().Len() != 3 || !r.Report().Clean() {
		t.Fatalf("leaf %s len %d report %+v", r.Tree().Leaf(), r.Tree().Len(), r.Report())
	}
	c, err := r.Tree().Context("")
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := c.LLMMessages()
	if err != nil || len(msgs) != 2 || msgs[1].Text() != "hello" || c.Model == nil || c.Model.ModelID != "faux-1" {
		t.Fatalf("context %+v err %v", c, err)
	}
	if _, err := r.Append(session.Entry{Type: session.TypeMessage, Message: u.Message, ParentID: "nope"}, session.SyncAlways); err == nil {
		t.Fatal("append under an unknown parent succeeded")
	}
	ro, err := session.Open(st, s.Path(), session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ro.Append(user("x"), session.SyncAlways); !errors.Is(err, session.ErrReadOnly) {
		t.Fatalf("read-only append: %v", err)
	}
}

func testKeyOrder(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	label := "x"
	tests := []struct {
		e    session.Entry
		keys string
	}{
		{session.Entry{Type: session.TypeCustom, CustomType: "c", Data: json.RawMessage(`{"a":1}`)}, "type,customType,data,id,parentId,timestamp"},
		{session.Entry{Type: session.TypeCustomMessage, CustomType: "c", Content: json.RawMessage(`"t"`), Display: true}, "type,customType,content,display,id,parentId,timestamp"},
		{session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "low"}, "type,id,parentId,timestamp,thinkingLevel"},
		{session.Entry{Type: session.TypeLabel, TargetID: s.Tree().Leaf(), Label: &label, Pibot: &session.Meta{Loc: "l"}}, "type,id,parentId,timestamp,targetId,label,pibot"},
		{session.Entry{Type: session.TypeCompaction, Summary: "s", FirstKeptEntryID: s.Tree().Leaf(), TokensBefore: 5}, "type,id,parentId,timestamp,summary,firstKeptEntryId,tokensBefore"},
	}
	for _, tc := range tests {
		e := appendE(t, s, tc.e, s.Tree().Leaf())
		if got := topKeys(t, e.Raw); got != tc.keys {
			t.Errorf("%s keys = %s, want %s", tc.e.Type, got, tc.keys)
		}
	}
}

func topKeys(t *testing.T, raw []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Join(keys, ",")
}

func testHeads(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	u := user("main")
	u.Pibot = &session.Meta{Loc: "dm", Msg: "m1", From: "u1"}
	u1 := appendE(t, s, u, s.Tree().Leaf())
	a1 := appendE(t, s, assistant("answer"), u1.ID)
	if err := s.MoveHead("thread", u1.ID, session.SyncAlways); err != nil {
		t.Fatal(err)
	}
	th := s.Tree().Heads()["thread"]
	t2 := user("in thread")
	t2.Pibot = &session.Meta{Loc: "thread", Msg: "m2"}
	u2 := appendE(t, s, t2, th)
	a2 := appendE(t, s, assistant("thread answer"), u2.ID)
	want := map[string]string{"dm": a1.ID, "thread": a2.ID}
	if got := s.Tree().Heads(); !reflect.DeepEqual(got, want) {
		t.Fatalf("heads %v, want %v", got, want)
	}
	r := reopen(t, st, s, session.Options{})
	if got := r.Tree().Heads(); !reflect.DeepEqual(got, want) {
		t.Fatalf("heads after reopen %v, want %v", got, want)
	}
	if id, ok := r.Tree().EntryForMsg("m2"); !ok || id != u2.ID {
		t.Fatalf("EntryForMsg(m2) = %s %v", id, ok)
	}
	c, _ := r.Tree().Context(a2.ID)
	if len(c.Messages) != 3 { // main, in thread, thread answer
		t.Fatalf("thread context has %d messages", len(c.Messages))
	}
	if r.Tree().Leaf() != a2.ID {
		t.Fatalf("default leaf %s", r.Tree().Leaf())
	}
}

func testTornTail(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	u := appendE(t, s, user("durable"), s.Tree().Leaf())
	_ = s.Close()
	data, _ := st.ReadFile(s.Path())
	torn := append(append([]byte(nil), data...), `{"type":"message","id":"abcd`...)
	if err := st.WriteFile(s.Path(), torn); err != nil {
		t.Fatal(err)
	}
	ro, err := session.Open(st, s.Path(), session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if ro.Tree().Leaf() != u.ID || ro.Report().TailBytes == 0 || ro.Report().TailTruncated {
		t.Fatalf("read-only: leaf %s report %+v", ro.Tree().Leaf(), ro.Report())
	}
	if after, _ := st.ReadFile(s.Path()); !bytes.Equal(after, torn) {
		t.Fatal("read-only open changed the file")
	}
	w, err := session.Open(st, s.Path(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rep := w.Report()
	if !rep.TailTruncated || rep.BrokenCopy == "" {
		t.Fatalf("report %+v", rep)
	}
	if b, _ := st.ReadFile(rep.BrokenCopy); !bytes.Equal(b, torn) {
		t.Fatal(".broken copy differs from the damaged file")
	}
	if after, _ := st.ReadFile(s.Path()); !bytes.Equal(after, data) {
		t.Fatalf("repaired file:\n%s\nwant\n%s", after, data)
	}
	n := appendE(t, w, user("next"), u.ID)
	w2 := reopen(t, st, w, session.Options{})
	if w2.Tree().Leaf() != n.ID || !w2.Report().Clean() {
		t.Fatalf("after repair: leaf %s report %+v", w2.Tree().Leaf(), w2.Report())
	}
}

func testMiddleDamage(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	a := appendE(t, s, user("a"), s.Tree().Leaf())
	b := appendE(t, s, assistant("b"), a.ID)
	c := appendE(t, s, user("c"), b.ID)
	d := appendE(t, s, assistant("d"), c.ID)
	_ = s.Close()
	data, _ := st.ReadFile(s.Path())
	// Destroy the line of c: d loses its parent.
	broken := bytes.Replace(data, c.Raw, []byte(`{"type":"message","id":`), 1)
	if err := st.WriteFile(s.Path(), broken); err != nil {
		t.Fatal(err)
	}
	w, err := session.Open(st, s.Path(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := w.Report()
	if len(rep.SkippedLines) != 1 || rep.SkippedLines[0].Line != 5 || rep.Reattached[d.ID] != b.ID || rep.RepairEntry == "" {
		t.Fatalf("report %+v", rep)
	}
	if after, _ := st.ReadFile(s.Path()); !bytes.HasPrefix(after, broken) {
		t.Fatal("middle damage was rewritten")
	}
	path, _ := w.Tree().Branch(d.ID)
	if len(path) != 4 || path[2].ID != b.ID {
		t.Fatalf("path to d has %d entries", len(path))
	}
	repair, _ := w.Tree().Get(rep.RepairEntry)
	if repair.CustomType != session.CustomRepair || repair.ParentID != d.ID {
		t.Fatalf("repair entry %+v", repair)
	}
	w2 := reopen(t, st, w, session.Options{})
	if w2.Report().RepairEntry != "" {
		t.Fatal("repair recorded twice")
	}
}

func testNotSession(t *testing.T, st session.Storage, dir string) {
	if err := st.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "notes.jsonl")
	content := []byte("{\"type\":\"message\",\"id\":\"x\"}\nhello\n")
	if err := st.WriteFile(path, content); err != nil {
		t.Fatal(err)
	}
	_, err := session.Open(st, path, session.Options{})
	if !errors.Is(err, session.ErrNotSession) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
	if after, _ := st.ReadFile(path); !bytes.Equal(after, content) {
		t.Fatal("non-session file was modified")
	}
}

func testFencing(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{Fence: 7})
	e := appendE(t, s, user("x"), s.Tree().Leaf())
	if e.Fence != 7 || !strings.Contains(string(e.Raw), `"fence":7`) {
		t.Fatalf("entry %s", e.Raw)
	}
	s.SetFenced(errors.New("lease lost"))
	_, err := s.Append(user("y"), session.SyncAlways)
	var fe *session.FencedError
	if !errors.Is(err, session.ErrFenced) || !errors.As(err, &fe) {
		t.Fatalf("append after fence: %v", err)
	}
	// Another writer changes the file: the writer refuses.
	w := reopen(t, st, s, session.Options{Fence: 8})
	other, err := session.Open(st, w.Path(), session.Options{Fence: 9})
	if err != nil {
		t.Fatal(err)
	}
	appendE(t, other, user("other"), other.Tree().Leaf())
	_ = other.Close()
	if _, err := w.Append(user("late"), session.SyncAlways); !errors.Is(err, session.ErrFenced) {
		t.Fatalf("append after foreign write: %v", err)
	}
}

func testStaleFence(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{Fence: 5})
	appendE(t, s, user("a"), s.Tree().Leaf())
	_ = s.Close()
	old, err := session.Open(st, s.Path(), session.Options{Fence: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	newer, err := session.Open(st, s.Path(), session.Options{Fence: 6})
	if err != nil {
		t.Fatal(err)
	}
	n := appendE(t, newer, user("new owner"), newer.Tree().Leaf())
	_ = newer.Close()
	if _, err := old.Append(user("stale"), session.SyncAlways); !errors.Is(err, session.ErrFenced) {
		t.Fatalf("stale writer append: %v", err)
	}
	// A stale writer that opens after the takeover is fenced at once.
	late, err := session.Open(st, s.Path(), session.Options{Fence: 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := late.Append(user("late"), session.SyncAlways); !errors.Is(err, session.ErrFenced) {
		t.Fatalf("late stale writer append: %v", err)
	}
	_ = late.Close()
	// A stale write that raced past the size check is ignored by readers.
	data, _ := st.ReadFile(s.Path())
	stale := `{"type":"message","id":"5ca1ab1e","parentId":"` + n.ID + `","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"stale","timestamp":1},"fence":5}` + "\n"
	if err := st.WriteFile(s.Path(), append(data, stale...)); err != nil {
		t.Fatal(err)
	}
	r, err := session.Open(st, s.Path(), session.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Tree().Leaf() != n.ID || len(r.Report().StaleFenced) != 1 {
		t.Fatalf("leaf %s report %+v", r.Tree().Leaf(), r.Report())
	}
}

func testFork(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	u := appendE(t, s, user("one"), s.Tree().Leaf())
	a := appendE(t, s, assistant("two"), u.ID)
	l1, l2 := "start", "side"
	lab := appendE(t, s, session.Entry{Type: session.TypeLabel, TargetID: u.ID, Label: &l1}, a.ID)
	u2 := appendE(t, s, user("three"), lab.ID) // parent is a label entry
	side := appendE(t, s, user("side"), a.ID)
	appendE(t, s, session.Entry{Type: session.TypeLabel, TargetID: a.ID, Label: &l2}, side.ID)
	f, err := session.Fork(s, u2.ID, filepath.Join(dir, "forks"), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Tree().Header().ParentSession == "" || f.Tree().Header().ID == s.Tree().Header().ID {
		t.Fatalf("header %+v", f.Tree().Header())
	}
	want, _ := s.Tree().Context(u2.ID)
	got, _ := f.Tree().Context(u2.ID)
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if !bytes.Equal(wb, gb) {
		t.Fatalf("fork context differs:\n%s\n%s", gb, wb)
	}
	if roots := f.Tree().Roots(); len(roots) != 1 {
		t.Fatalf("fork has %d roots", len(roots))
	}
	labels := f.Tree().Labels()
	if labels[u.ID].Label != "start" || labels[a.ID].Label != "side" {
		t.Fatalf("fork labels %v", labels)
	}
}

func testClone(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	_ = s.Close()
	data, _ := st.ReadFile(s.Path())
	extra := `{"type":"message","id":"0000abcd","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","future":{"x":[1,2]},"message":{"role":"user","content":"u","timestamp":1,"newField":true}}` + "\n"
	if err := st.WriteFile(s.Path(), append(data, extra...)); err != nil {
		t.Fatal(err)
	}
	r, err := session.Open(st, s.Path(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := session.Clone(r, filepath.Join(dir, "clones"), "/other", session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, _ := st.ReadFile(c.Path())
	if !bytes.Contains(out, []byte(extra)) || c.Tree().Header().Cwd != "/other" {
		t.Fatalf("clone lost unknown fields:\n%s", out)
	}
	ctx, _ := c.Tree().Context("0000abcd")
	if string(ctx.Messages[0]) != `{"role":"user","content":"u","timestamp":1,"newField":true}` {
		t.Fatalf("context message %s", ctx.Messages[0])
	}
}

func testGroupedList(t *testing.T, st session.Storage, dir string) {
	s := create(t, st, dir, session.Options{})
	parent := s.Tree().Leaf()
	for i := range 20 {
		e := user("msg")
		if i%2 == 1 {
			e = assistant("ans")
		}
		e.ParentID = parent
		out, err := s.Append(e, session.SyncGrouped)
		if err != nil {
			t.Fatal(err)
		}
		parent = out.ID
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	name := "  my session "
	appendE(t, s, session.Entry{Type: session.TypeSessionInfo, Name: &name}, parent)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	infos, err := session.ListStorage(st, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].MessageCount != 20 || infos[0].FirstMessage != "msg" || infos[0].Name != "my session" {
		t.Fatalf("list %+v", infos)
	}
}
