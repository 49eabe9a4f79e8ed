package session

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pibot/pibot/llm"
)

// branchFixture is a session on disk and a BranchCache that follows it.
type branchFixture struct {
	t     *testing.T
	s     *Session
	cache BranchCache
}

// add appends e under parent and returns its id.
func (f *branchFixture) add(e Entry, parent string) string {
	f.t.Helper()
	e.ParentID = parent
	got, err := f.s.Append(e, SyncGrouped)
	if err != nil {
		f.t.Fatal(err)
	}
	return got.ID
}

// check compares the cache's context at leaf with the one rebuilt from
// the root, reports whether the cache extended its previous context
// instead of rebuilding it, and appends to the result as an agent
// adopting it does.
func (f *branchFixture) check(step, leaf string) (extended bool) {
	f.t.Helper()
	rebuilds := f.cache.rebuilds
	got, err := f.cache.Context(f.s.Tree(), leaf)
	if err != nil {
		f.t.Fatalf("%s: %v", step, err)
	}
	c, err := f.s.Tree().Context(leaf)
	if err != nil {
		f.t.Fatal(err)
	}
	want, err := c.LLMMessages()
	if err != nil {
		f.t.Fatal(err)
	}
	if len(got.Messages) != len(want) {
		f.t.Fatalf("%s: %d messages, rebuilt %d", step, len(got.Messages), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got.Messages[i], want[i]) {
			f.t.Errorf("%s: message %d = %+v\nrebuilt %+v", step, i, got.Messages[i], want[i])
		}
	}
	if got.ThinkingLevel != c.ThinkingLevel || !reflect.DeepEqual(got.Model, c.Model) {
		f.t.Errorf("%s: thinking %q model %+v, rebuilt %q %+v", step, got.ThinkingLevel, got.Model, c.ThinkingLevel, c.Model)
	}
	if cap(got.Messages)-len(got.Messages) < branchHeadroom {
		f.t.Errorf("%s: spare capacity %d", step, cap(got.Messages)-len(got.Messages))
	}
	extended = f.cache.rebuilds == rebuilds
	// An agent adopts the slice and appends its run's messages.
	_ = append(got.Messages, llm.UserText("the agent's own", 99), llm.UserText("and another", 100))
	return extended
}

// TestBranchCacheMatchesRebuild: across growth, settings, derived
// messages, a branch switch, an edit, a compaction and a reopened file,
// the cached context equals the one built from the root, and a branch
// that only grew is extended in place.
func TestBranchCacheMatchesRebuild(t *testing.T) {
	dir := t.TempDir()
	s, err := CreateFile(dir, Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &branchFixture{t: t, s: s}
	user := func(text string) Entry {
		m := llm.UserText(text, 1)
		return Entry{Type: TypeMessage, Message: &m}
	}
	answer := func(text string) Entry {
		m := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock(text)}, API: "a", Provider: "p2", Model: "m2",
			Usage: llm.Usage{Input: 3, Output: 4, Cost: llm.Cost{Input: 0.25, Total: 0.25}}, StopReason: llm.StopStop, Timestamp: 2}
		return Entry{Type: TypeMessage, Message: &m}
	}
	f.check("first", "")
	root := s.Tree().Leaf()
	u1 := f.add(user("one"), root)
	a1 := f.add(answer("first answer"), u1)
	if !f.check("grown", a1) {
		t.Error("grown: rebuilt instead of extended")
	}
	th := f.add(Entry{Type: TypeThinkingLevelChange, ThinkingLevel: "high"}, a1)
	mc := f.add(Entry{Type: TypeModelChange, Provider: "p3", ModelID: "m3"}, th)
	cm := f.add(Entry{Type: TypeCustomMessage, CustomType: "note", Content: json.RawMessage(`"a note"`), Display: true}, mc)
	bs := f.add(Entry{Type: TypeBranchSummary, FromID: u1, Summary: "elsewhere"}, cm)
	u2 := f.add(user("two"), bs)
	a2 := f.add(answer("second answer"), u2)
	if !f.check("settings and derived messages", a2) {
		t.Error("settings and derived messages: rebuilt instead of extended")
	}
	f.check("same leaf", a2)
	// Back to an earlier entry, then an edit: a new branch from u1's parent.
	f.check("branch switch", a1)
	e1 := f.add(user("one, edited"), root)
	f.check("edit", e1)
	ea := f.add(answer("edited answer"), e1)
	if !f.check("edit grown", ea) {
		t.Error("edit grown: rebuilt instead of extended")
	}
	comp := f.add(Entry{Type: TypeCompaction, Summary: "so far", FirstKeptEntryID: ea, TokensBefore: 10}, ea)
	f.check("compaction", comp)
	u3 := f.add(user("three"), comp)
	a3 := f.add(answer("third answer"), u3)
	if !f.check("after compaction", a3) {
		t.Error("after compaction: rebuilt instead of extended")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenFile(filepath.Join(dir, filepath.Base(s.Path())), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f.s = r
	if f.check("reopened", a3) {
		t.Error("reopened: extended the old tree's messages")
	}
	u4 := f.add(user("four"), a3)
	if !f.check("reopened grown", u4) {
		t.Error("reopened grown: rebuilt instead of extended")
	}
	if _, err := f.cache.Context(r.Tree(), "nope"); err == nil {
		t.Error("unknown leaf: no error")
	}
}

// A live session keeps one decoded copy of a message: the one a
// BranchCache took from the append, not another on the tree's node. A
// context built afterwards decodes the lines and equals the cache's.
func TestBranchCacheTakesTheAppendedCopy(t *testing.T) {
	s, err := CreateFile(t.TempDir(), Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f := &branchFixture{t: t, s: s}
	leaf := s.Tree().Leaf()
	var cache BranchCache
	for i, text := range []string{"one", "two", "three"} {
		u := llm.UserText(text, int64(i))
		leaf = f.add(Entry{Type: TypeMessage, Message: &u}, leaf)
		a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("re: " + text)}, StopReason: llm.StopStop}
		leaf = f.add(Entry{Type: TypeMessage, Message: &a}, leaf)
		got, err := cache.Context(s.Tree(), leaf)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) != 2*(i+1) {
			t.Fatalf("run %d: %d messages", i, len(got.Messages))
		}
		s.Tree().mu.RLock()
		for _, n := range s.Tree().nodes {
			if n.decoded.Load() != nil {
				t.Errorf("run %d: entry %s keeps a decoded copy beside the cache's", i, n.id)
			}
		}
		s.Tree().mu.RUnlock()
	}
	f.cache = cache
	f.check("after the takes", leaf)
}
