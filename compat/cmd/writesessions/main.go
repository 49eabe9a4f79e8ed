// Command writesessions writes session files with pibot's session package
// for the pi compatibility check (compat/pi-check.sh): branches, labels,
// compaction, custom and branch-summary entries, pibot chat metadata and
// heads, a fork and a repaired torn file. Next to each FILE.jsonl it writes
// FILE.pibot.json: pibot's context for the default leaf and for every entry
// as leaf, and the number of tree roots.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

func main() {
	out := flag.String("out", "", "output directory (required unless -expect)")
	expect := flag.Bool("expect", false, "only write FILE.pibot.json for each session FILE given as an argument")
	flag.Parse()
	if *expect {
		for _, f := range flag.Args() {
			if err := writeExpected(f); err != nil {
				fmt.Fprintln(os.Stderr, "writesessions:", err)
				os.Exit(1)
			}
			fmt.Println(f)
		}
		return
	}
	if *out == "" {
		fmt.Fprintln(os.Stderr, "writesessions: -out is required")
		os.Exit(2)
	}
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "writesessions:", err)
		os.Exit(1)
	}
}

type writer struct {
	s   *session.Session
	err error
}

func (w *writer) add(e session.Entry, parent string) string {
	if w.err != nil {
		return ""
	}
	e.ParentID = parent
	out, err := w.s.Append(e, session.SyncGrouped)
	w.err = err
	return out.ID
}

func msg(m llm.Message) session.Entry { return session.Entry{Type: session.TypeMessage, Message: &m} }

func user(text string, meta *session.Meta) session.Entry {
	e := msg(llm.UserText(text, 1795986037632))
	e.Pibot = meta
	return e
}

func assistant(text string, calls ...llm.Content) session.Entry {
	stop := llm.StopStop
	content := []llm.Content{{Type: llm.ContentThinking, Thinking: "thinking about " + text, ThinkingSignature: "sig"}, llm.TextBlock(text)}
	if len(calls) > 0 {
		stop = llm.StopToolUse
		content = append(content, calls...)
	}
	return msg(llm.Message{Role: llm.RoleAssistant, Content: content, API: "anthropic-messages", Provider: "anthropic", Model: "claude-sonnet-4-5",
		Usage: llm.Usage{Input: 100, Output: 20, TotalTokens: 120}, StopReason: stop, Timestamp: 1795986037700})
}

func toolResult(id, name, text string) session.Entry {
	return msg(llm.Message{Role: llm.RoleToolResult, ToolCallID: id, ToolName: name, Content: []llm.Content{llm.TextBlock(text)},
		Details: json.RawMessage(`{"lines":3}`), Timestamp: 1795986037800})
}

func run(dir string) error {
	first := session.Entry{Type: session.TypeModelChange, Provider: "anthropic", ModelID: "claude-sonnet-4-5"}
	s, err := session.CreateFile(dir, session.Header{Cwd: "/home/u/proj"}, first, session.Options{})
	if err != nil {
		return err
	}
	w := &writer{s: s}
	root := s.Tree().Leaf()
	tl := w.add(session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "medium"}, root)
	u1 := w.add(user("Read hello.txt, please — ünïcødé 🚀 \u2028 line", &session.Meta{Loc: "telegram:1", Msg: "telegram:1:10", From: "u1"}), tl)
	call := llm.Content{Type: llm.ContentToolCall, ID: "call_1", Name: "read", Arguments: json.RawMessage(`{"path":"hello.txt"}`)}
	a1 := w.add(assistant("Reading.", call), u1)
	r1 := w.add(toolResult("call_1", "read", "line one\nline two\n"), a1)
	a2 := w.add(assistant("It has two lines."), r1)
	l1 := "first question"
	lab := w.add(session.Entry{Type: session.TypeLabel, TargetID: u1, Label: &l1}, a2)
	u2 := w.add(user("Now summarise it", &session.Meta{Loc: "telegram:1", Msg: "telegram:1:12"}), lab)
	// The reply journal: a custom entry between a user message and its
	// answer, as the gateway writes it while a reply streams.
	rp := w.add(session.Entry{Type: session.TypeCustom, CustomType: "pibot.reply", Data: json.RawMessage(`{"refs":[{"conv":{"platform":"telegram","channel":"1"},"id":"13"}],"state":"streaming"}`), Pibot: &session.Meta{Loc: "telegram:1"}}, u2)
	a3 := w.add(assistant("Two lines of text."), rp)
	// A reply to an older message branches (new head for the location).
	if w.err == nil {
		w.err = s.MoveHead("telegram:1", a1, session.SyncAlways)
	}
	head := s.Tree().Heads()["telegram:1"]
	u3 := w.add(user("Actually, read world.txt", &session.Meta{Loc: "telegram:1", Msg: "telegram:1:14"}), head)
	a4 := w.add(assistant("Sure."), u3)
	mc := w.add(session.Entry{Type: session.TypeModelChange, Provider: "openai", ModelID: "gpt-5"}, a4)
	hook := false
	bs := w.add(session.Entry{Type: session.TypeBranchSummary, FromID: a3, Summary: "The user explored reading hello.txt.", Details: json.RawMessage(`{"readFiles":["hello.txt"],"modifiedFiles":[]}`), FromHook: &hook}, mc)
	cm := w.add(session.Entry{Type: session.TypeCustomMessage, CustomType: "pibot.note", Content: json.RawMessage(`[{"type":"text","text":"note"}]`), Display: true}, bs)
	cu := w.add(session.Entry{Type: session.TypeCustom, CustomType: "pibot.delivery", Data: json.RawMessage(`{"chat":"x","ok":true}`)}, cm)
	comp := w.add(session.Entry{Type: session.TypeCompaction, Summary: "## Goal\nRead files.", FirstKeptEntryID: u3, TokensBefore: 4242, Details: json.RawMessage(`{"readFiles":[],"modifiedFiles":[]}`), FromHook: &hook}, cu)
	u4 := w.add(user("After compaction", &session.Meta{Loc: "telegram:1"}), comp)
	w.add(assistant("Still here."), u4)
	name := " pibot compat "
	w.add(session.Entry{Type: session.TypeSessionInfo, Name: &name}, s.Tree().Leaf())
	// A second root (pi's resetLeaf) in another location.
	w.add(user("Separate root", &session.Meta{Loc: "slack:C1:T1"}), "")
	if w.err != nil {
		return w.err
	}
	if err := s.Flush(); err != nil {
		return err
	}
	files := []string{s.Path()}

	// Fork at a3: the path crosses the label entry, which pi's fork drops.
	f, err := session.Fork(s, a3, dir, session.Options{})
	if err != nil {
		return err
	}
	files = append(files, f.Path())
	_ = f.Close()
	c, err := session.Clone(s, filepath.Join(dir, "clone"), "/home/u/other", session.Options{})
	if err != nil {
		return err
	}
	files = append(files, c.Path())
	_ = c.Close()
	if err := s.Close(); err != nil {
		return err
	}

	// A torn tail repaired by a writable open, then appended to.
	t, err := session.CreateFile(filepath.Join(dir, "torn"), session.Header{Cwd: "/home/u/proj"}, user("hello", nil), session.Options{})
	if err != nil {
		return err
	}
	tw := &writer{s: t}
	tw.add(assistant("hi"), t.Tree().Leaf())
	if tw.err != nil {
		return tw.err
	}
	tp := t.Path()
	_ = t.Close()
	fh, err := os.OpenFile(tp, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, _ = fh.WriteString(`{"type":"message","id":"deadbeef","parentId":`)
	_ = fh.Close()
	t, err = session.OpenFile(tp, session.Options{})
	if err != nil {
		return err
	}
	tw = &writer{s: t}
	tw.add(user("after the crash", nil), t.Tree().Leaf())
	if tw.err != nil {
		return tw.err
	}
	_ = t.Close()
	files = append(files, tp)

	for _, p := range files {
		if err := writeExpected(p); err != nil {
			return err
		}
		fmt.Println(p)
	}
	return nil
}

// writeExpected writes FILE.pibot.json with pibot's contexts.
func writeExpected(path string) error {
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	contexts := map[string]session.Context{}
	def, err := s.Tree().Context("")
	if err != nil {
		return err
	}
	for _, e := range s.Tree().Entries() {
		c, err := s.Tree().Context(e.ID)
		if err != nil {
			return err
		}
		contexts[e.ID] = c
	}
	out, err := json.Marshal(map[string]any{"defaultLeaf": s.Tree().Leaf(), "default": def, "leaves": contexts, "roots": len(s.Tree().Roots())})
	if err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(path, ".jsonl")+".pibot.json", out, 0o600)
}
