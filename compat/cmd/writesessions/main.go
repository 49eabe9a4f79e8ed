// Command writesessions writes session files with pibot's session package
// for the pi compatibility check (compat/pi-check.sh): branches, labels,
// compaction, custom and branch-summary entries, pibot chat metadata and
// heads, a fork, a repaired torn file, a header with "version":"3" and one
// after a byte order mark. With -legacy DIR it writes version-1 and
// version-2 files as pi wrote them, for pi itself to migrate. Next to each
// FILE.jsonl it writes FILE.pibot.json: pibot's context for the default
// leaf and for every entry as leaf, as `pibot session context` answers it
// (checked against the full loader), and the number of tree roots.
package main

import (
	"bytes"
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
	legacy := flag.String("legacy", "", "only write version-1 and version-2 session files into `DIR`")
	flag.Parse()
	if *legacy != "" {
		files, err := writeLegacy(*legacy)
		if err != nil {
			fmt.Fprintln(os.Stderr, "writesessions:", err)
			os.Exit(1)
		}
		for _, f := range files {
			fmt.Println(f)
		}
		return
	}
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

	// Headers pi reads although pibot once did not: "version" as a
	// string, and a byte order mark in front.
	data, err := os.ReadFile(s.Path())
	if err != nil {
		return err
	}
	for name, content := range map[string][]byte{
		"version-string.jsonl": []byte(strings.Replace(string(data), `"version":3`, `"version":"3"`, 1)),
		"bom.jsonl":            append([]byte("\ufeff"), data...),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			return err
		}
		files = append(files, p)
	}

	for _, p := range files {
		if err := writeExpected(p); err != nil {
			return err
		}
		fmt.Println(p)
	}
	return nil
}

// writeLegacy writes a version-1 file (no ids; a compaction that names its
// first kept entry by index; the header carries the model) and a
// version-2 file (a tree with hookMessage roles) in dir, as pi wrote them.
func writeLegacy(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ts := func(s int) string { return fmt.Sprintf(`"2025-12-08T22:41:%02d.000Z"`, s) }
	user := func(s int, text string) string {
		return `{"type":"message","timestamp":` + ts(s) + `,"message":{"role":"user","content":[{"type":"text","text":"` + text + `"}],"timestamp":1765233666500}}`
	}
	answer := func(s int, text, stop string, blocks ...string) string {
		content := append([]string{`{"type":"text","text":"` + text + `"}`}, blocks...)
		return `{"type":"message","timestamp":` + ts(s) + `,"message":{"role":"assistant","content":[` + strings.Join(content, ",") +
			`],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1200,"output":180,"cacheRead":0,"cacheWrite":0,"cost":{"input":0.0036,"output":0.0027,"cacheRead":0,"cacheWrite":0,"total":0.0063}},"stopReason":"` + stop + `","timestamp":1765233668000}}`
	}
	v1 := []string{
		`{"type":"session","id":"3f0d3c1e-5b8a-4d5e-9c61-2f4b8e7a1d91","timestamp":` + ts(5) + `,"cwd":"/home/u/proj","provider":"anthropic","modelId":"claude-sonnet-4-5","thinkingLevel":"off"}`,
		user(6, "Read hello.txt, please — ünïcødé 🚀"),
		answer(8, "Reading.", "toolUse", `{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"hello.txt"}}`),
		`{"type":"message","timestamp":` + ts(9) + `,"message":{"role":"toolResult","toolCallId":"toolu_1","toolName":"read","content":[{"type":"text","text":"line one\nline two\n"}],"isError":false,"timestamp":1765233669500}}`,
		answer(11, "It has two lines.", "stop"),
		`{"type":"thinking_level_change","timestamp":` + ts(12) + `,"thinkingLevel":"high"}`,
		user(13, "Now run ls"),
		`{"type":"message","timestamp":` + ts(14) + `,"message":{"role":"bashExecution","command":"ls","output":"hello.txt\n","exitCode":0,"cancelled":false,"truncated":false,"timestamp":1765233674000}}`,
		answer(15, "One file.", "stop"),
		`{"type":"compaction","timestamp":` + ts(16) + `,"summary":"## Goal\nRead hello.txt.","firstKeptEntryIndex":6,"tokensBefore":4242}`,
		`{"type":"model_change","timestamp":` + ts(17) + `,"provider":"openai","modelId":"gpt-5"}`,
		user(18, "After the compaction"),
		answer(20, "Still here.", "stop"),
	}
	v2 := []string{
		`{"type":"session","version":2,"id":"9b2e4f60-1c3d-4e5f-a6b7-c8d9e0f1a2b4","timestamp":` + ts(0) + `,"cwd":"/home/u/proj"}`,
		`{"type":"model_change","id":"10ac7533","parentId":null,"timestamp":` + ts(1) + `,"provider":"anthropic","modelId":"claude-opus-4-5"}`,
		`{"type":"message","id":"10afa765","parentId":"10ac7533","timestamp":` + ts(2) + `,"message":{"role":"user","content":"Hi","timestamp":1767016803000}}`,
		`{"type":"message","id":"10b1407e","parentId":"10afa765","timestamp":` + ts(3) + `,"message":{"role":"hookMessage","customType":"hook","content":"from a hook","display":true,"timestamp":1767016804000}}`,
		`{"type":"message","id":"10b2d997","parentId":"10b1407e","timestamp":` + ts(4) + `,"message":{"role":"assistant","content":[{"type":"text","text":"Hello."}],"api":"anthropic-messages","provider":"anthropic","model":"claude-opus-4-5","usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1767016805000}}`,
		`{"type":"message","id":"10b46a2f","parentId":"10afa765","timestamp":` + ts(5) + `,"message":{"role":"hookMessage","customType":"hook","content":[{"type":"text","text":"another branch"}],"display":false,"details":{"n":1},"timestamp":1767016806000}}`,
	}
	var files []string
	for name, lines := range map[string][]string{"legacy-v1.jsonl": v1, "legacy-v2.jsonl": v2} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return nil, err
		}
		files = append(files, p)
	}
	return files, nil
}

// writeExpected writes FILE.pibot.json with pibot's contexts: what
// `pibot session context` answers (session.WriteContext), which must be
// what the full loader builds.
func writeExpected(path string) error {
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	answer := func(leaf string) (json.RawMessage, error) {
		want, err := s.Tree().Context(leaf)
		if err != nil {
			return nil, err
		}
		wantJSON, err := want.MarshalJSON()
		if err != nil {
			return nil, err
		}
		var got bytes.Buffer
		var st session.ContextStats
		if _, err := session.WriteContext(&got, path, leaf, &st); err != nil {
			return nil, err
		}
		if !bytes.Equal(bytes.TrimSuffix(got.Bytes(), []byte("\n")), wantJSON) {
			return nil, fmt.Errorf("%s: leaf %q: session context (fast %v, %s) differs from the full loader:\n%.300s\n%.300s", path, leaf, st.Fast, st.Fallback, got.Bytes(), wantJSON)
		}
		return wantJSON, nil
	}
	contexts := map[string]json.RawMessage{}
	def, err := answer("")
	if err != nil {
		return err
	}
	for _, e := range s.Tree().Entries() {
		if contexts[e.ID], err = answer(e.ID); err != nil {
			return err
		}
	}
	out, err := json.Marshal(map[string]any{"defaultLeaf": s.Tree().Leaf(), "default": def, "leaves": contexts, "roots": len(s.Tree().Roots())})
	if err != nil {
		return err
	}
	return os.WriteFile(strings.TrimSuffix(path, ".jsonl")+".pibot.json", out, 0o600)
}
