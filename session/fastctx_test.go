package session_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

// fullContext is today's answer: a read-only open, Context, MarshalJSON
// and a newline, with the report.
func fullContext(t testing.TB, path, leaf string) ([]byte, session.Report, error) {
	t.Helper()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return nil, session.Report{}, err
	}
	defer s.Close()
	c, err := s.Tree().Context(leaf)
	if err != nil {
		return nil, s.Report(), err
	}
	b, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n'), s.Report(), nil
}

// sameContext checks session.WriteContext against the full loader for one leaf
// and returns the stats.
func sameContext(t *testing.T, path, leaf string) session.ContextStats {
	return sameContextDamage(t, path, leaf, false)
}

// sameContextDamage is sameContext; unreported says the file has damage
// the fast path does not read (its report may differ).
func sameContextDamage(t *testing.T, path, leaf string, unreported bool) session.ContextStats {
	t.Helper()
	want, wantRep, wantErr := fullContext(t, path, leaf)
	var got bytes.Buffer
	var st session.ContextStats
	rep, err := session.WriteContext(&got, path, leaf, &st)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("leaf %q: error %v, full loader %v", leaf, err, wantErr)
	}
	if err != nil {
		return st
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("leaf %q (fast %v, %s): output differs from the full loader\n got %.300s\nwant %.300s", leaf, st.Fast, st.Fallback, got.Bytes(), want)
	}
	if st.Out != int64(len(want)) {
		t.Errorf("stats: Out %d, wrote %d", st.Out, len(want))
	}
	if !reflect.DeepEqual(rep, wantRep) && !unreported {
		t.Errorf("report %+v (fast %v), full loader %+v", rep, st.Fast, wantRep)
	}
	return st
}

// vectorsDir finds shared/testdata/pi by walking up from the working dir.
func vectorsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		for _, cand := range []string{filepath.Join(dir, "shared", "testdata", "pi"), filepath.Join(dir, "..", "shared", "testdata", "pi")} {
			if _, err := os.Stat(filepath.Join(cand, "manifest.json")); err == nil {
				return cand
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("shared/testdata/pi not found")
		}
		dir = parent
	}
}

func TestWriteContextVectors(t *testing.T) {
	dir := vectorsDir(t)
	// Files the full loader must answer: migrated, or damaged where the
	// fast path looks.
	full := map[string]bool{"legacy-v1": true, "legacy-v2": true, "malformed-lines": true, "torn-tail": true}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range files {
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		if strings.Contains(name, ".") { // NAME.context, NAME.tree, NAME.migrated
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			st := sameContext(t, p, "")
			if st.Fast == full[name] {
				t.Errorf("default leaf: fast %v (fallback %q), want fast %v", st.Fast, st.Fallback, !full[name])
			}
			s, err := session.OpenFile(p, session.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Every 100th leaf of a large file; under -short every
			// 1,000th (deep-chain's 5,000 entries were most of this
			// package's short run; scripts/test --all checks every 100th).
			step := 100
			if testing.Short() {
				step = 1000
			}
			for i, e := range s.Tree().Entries() {
				if i%step == 0 || s.Tree().Len() < 200 {
					sameContext(t, p, e.ID)
				}
			}
			sameContext(t, p, "no-such-entry")
		})
	}
	if n < 15 {
		t.Fatalf("only %d vectors found", n)
	}
}

func generated(t testing.TB, n int, seed uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := sessiontest.Generate(&b, n, seed); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeTemp(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteContextGenerated covers large files: lines scanned in
// parallel, compactions cutting the path, branches, ids the generator
// repeats.
func TestWriteContextGenerated(t *testing.T) {
	for _, tc := range []struct {
		n    int
		seed uint64
	}{{50, 1}, {3000, 2}, {6000, 3}} {
		if testing.Short() && tc.n > 3000 {
			continue // the parts of a large file: scripts/test --all
		}
		p := writeTemp(t, generated(t, tc.n, tc.seed))
		st := sameContext(t, p, "")
		if !st.Fast {
			t.Errorf("%d entries: fell back: %s", tc.n, st.Fallback)
		}
		if st.Lines < tc.n || st.Path == 0 || st.Bytes == 0 {
			t.Errorf("%d entries: stats %+v", tc.n, st)
		}
	}
}

// TestWriteContextLongLineAtPartBoundary: a large file is indexed in
// parts; a line longer than the read buffer where they meet is read whole
// by one of them.
func TestWriteContextLongLineAtPartBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("a 6,000-entry file through both loaders: scripts/test --all")
	}
	ls := lines(generated(t, 6000, 4))
	size := 0
	for _, l := range ls {
		size += len(l) + 1
	}
	big := []byte(msgLine("b1900001", "", strings.Repeat("x", 3<<20), ""))
	half, at := 0, 0
	for at = range ls {
		if half += len(ls[at]) + 1; half > size/2-(1<<20) {
			break
		}
	}
	ls = append(ls[:at:at], append([][]byte{big}, ls[at:]...)...)
	p := writeTemp(t, join(ls))
	st := sameContext(t, p, "")
	if !st.Fast {
		t.Fatalf("fell back: %s", st.Fallback)
	}
	if st := sameContext(t, p, "b1900001"); !st.Fast {
		t.Fatalf("leaf on the long line: fell back: %s", st.Fallback)
	}
}

// lines splits a file into its lines (without newlines).
func lines(data []byte) [][]byte {
	return bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

func join(ls [][]byte) []byte { return append(bytes.Join(ls, []byte("\n")), '\n') }

func msgLine(id, parent, text, extra string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	return `{"type":"message","id":"` + id + `","parentId":` + p + `,"timestamp":"2026-01-02T03:04:05.000Z"` + extra +
		`,"message":{"role":"user","content":[{"type":"text","text":"` + text + `"}],"timestamp":1}}`
}

const header = `{"type":"session","version":3,"id":"0190a000-0000-7000-8000-000000000001","timestamp":"2026-01-02T03:04:05.000Z","cwd":"/w"}`

// TestWriteContextFallback builds files the fast path must not answer by
// itself and files it must answer despite looking unusual; every output is
// compared with the full loader's.
func TestWriteContextFallback(t *testing.T) {
	base := lines(generated(t, 300, 7))
	last := len(base) - 1
	leafParent := func() string { // the id of the default leaf's parent
		var e struct{ ParentId string }
		_ = json.Unmarshal(base[last], &e)
		return e.ParentId
	}
	indexOf := func(id string) int {
		for i, l := range base {
			if bytes.Contains(l, []byte(`"id":"`+id+`"`)) {
				return i
			}
		}
		t.Fatalf("no line with id %s", id)
		return -1
	}
	mutate := func(f func(ls [][]byte) [][]byte) []byte {
		ls := make([][]byte, len(base))
		for i := range base {
			ls[i] = bytes.Clone(base[i])
		}
		return join(f(ls))
	}
	var mid struct{ ID string }
	_ = json.Unmarshal(base[len(base)/2], &mid)
	big := strings.Repeat("0123456789abcdef", 1<<17) // 2 MiB, longer than the read buffer
	var manyDups strings.Builder
	manyDups.WriteString(header + "\n")
	for i := range 70 {
		l := msgLine(fmt.Sprintf("d%07d", i), "", "dup", "")
		manyDups.WriteString(l + "\n" + l + "\n")
	}
	tests := []struct {
		name     string
		data     []byte
		leaf     string
		fast     bool
		fallback string // part of the reason
	}{
		{"clean", join(base), "", true, ""},
		{"damaged body on the path", mutate(func(ls [][]byte) [][]byte {
			i := indexOf(leafParent())
			ls[i] = bytes.Replace(ls[i], []byte(`"content":`), []byte(`"content":x`), 1)
			return ls
		}), "", false, "invalid JSON"},
		{"damaged body off the path", mutate(func(ls [][]byte) [][]byte {
			// An entry on another branch: the answer does not depend on it.
			return append(ls[:last:last], []byte(msgLine("0ff0ff01", "", `broken\q`, "")), ls[last])
		}), "", true, ""},
		{"torn tail", append(join(base), []byte(`{"type":"message","id":"abcdef01","parentId":null,"message":{"role":"us`)...), "", false, "does not end"},
		{"torn prefix", append(join(base), []byte(`{"type":"message","id":"abc`)...), "", false, "invalid JSON"},
		{"missing final newline", bytes.TrimSuffix(join(base), []byte("\n")), "", true, ""},
		{"blank lines and CRLF", bytes.ReplaceAll(join(base), []byte("\n"), []byte("\r\n\n  \n")), "", true, ""},
		{"legacy version", mutate(func(ls [][]byte) [][]byte {
			ls[0] = bytes.Replace(ls[0], []byte(`"version":3`), []byte(`"version":2`), 1)
			return ls
		}), "", false, "version 2"},
		{"stale fence", []byte(header + "\n" + msgLine("a0000001", "", "one", `,"fence":5`) + "\n" + msgLine("a0000002", "a0000001", "two", `,"fence":4`) + "\n"), "", false, "stale fence"},
		{"fences in front of the message", []byte(header + "\n" + msgLine("a0000001", "", "one", `,"pibot":{"loc":"l"},"fence":5`) + "\n" + msgLine("a0000002", "a0000001", "two", `,"fence":5`) + "\n"), "", true, ""},
		{"stale fence after the message", []byte(header + "\n" + msgLine("a0000001", "", "one", `,"fence":5`) + "\n" +
			strings.TrimSuffix(msgLine("a0000002", "a0000001", "two", ""), "}") + `,"pibot":{"loc":"l"},"fence":4}` + "\n" + msgLine("a0000003", "a0000001", "three", "") + "\n"), "", false, "stale fence"},
		{"fences after the message, as pibot wrote them before", []byte(header + "\n" + msgLine("a0000001", "", "one", `,"fence":5`) + "\n" +
			strings.TrimSuffix(msgLine("a0000002", "a0000001", "two", ""), "}") + `,"pibot":{"loc":"l"},"fence":6}` + "\n" + msgLine("a0000003", "a0000002", "three", `,"fence":6`) + "\n"), "", true, ""},
		{"model set before a compaction's kept messages", []byte(header + "\n" +
			`{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"assistant","content":[],"provider":"p","model":"m1","timestamp":1}}` + "\n" +
			msgLine("a0000002", "a0000001", "two", "") + "\n" +
			`{"type":"compaction","id":"a0000003","parentId":"a0000002","timestamp":"2026-01-02T03:04:06.000Z","summary":"s","firstKeptEntryId":"a0000002","tokensBefore":5}` + "\n" +
			msgLine("a0000004", "a0000003", "four", "") + "\n"), "", true, ""},
		{"parent after the child", []byte(header + "\n" + msgLine("a0000002", "a0000001", "two", "") + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000003", "a0000002", "three", "") + "\n"), "", false, "not an earlier entry"},
		{"own parent", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000002", "a0000002", "two", "") + "\n"), "", false, "not an earlier entry"},
		{"unknown parent", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000002", "gone", "two", "") + "\n"), "", true, ""},
		{"unknown parent after a damaged body", []byte(header + "\n" + msgLine("a0000001", "", `bad\q`, "") + "\n" + msgLine("a0000002", "", "two", "") + "\n" + msgLine("a0000003", "gone", "three", "") + "\n"), "", false, "parent is missing"},
		{"duplicate id, the later one wins", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000002", "a0000001", "two", "") + "\n" +
			msgLine("a0000001", "", "one again", "") + "\n" + msgLine("a0000003", "a0000001", "three", "") + "\n"), "", true, ""},
		{"duplicate id after its child", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000003", "a0000001", "three", "") + "\n" +
			msgLine("a0000001", "", "one again", "") + "\n" + msgLine("a0000004", "", "four", "") + "\n"), "a0000003", false, "not an earlier entry"},
		{"many duplicate ids", []byte(manyDups.String()), "", false, "70 duplicate entry ids"},
		{"escaped id", []byte(header + "\n" + msgLine(`a\u0030000001`, "", "one", "") + "\n" + msgLine("a0000002", "a0000001", "two", "") + "\n"), "", true, ""},
		{"envelope after the message", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" +
			`{"type":"message","message":{"role":"user","content":"x","timestamp":1},"id":"a0000002","parentId":"a0000001"}` + "\n"), "", true, ""},
		// A message of the path the answer does not hold (before the
		// compaction's kept range, a model change after it) is not read
		// when losing it changes nothing, and read when the loader,
		// skipping it, would hang its child elsewhere (here under b1).
		{"damaged message the answer skips, next to its parent and child", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" +
			`{"type":"message","id":"m0000001","parentId":"a0000001","timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"user","content":[7]}}` + "\n" +
			`{"type":"model_change","id":"c0000001","parentId":"m0000001","timestamp":"2026-01-02T03:04:05.000Z","provider":"p","modelId":"m"}` + "\n" +
			`{"type":"compaction","id":"c0000002","parentId":"c0000001","timestamp":"2026-01-02T03:04:06.000Z","summary":"s","firstKeptEntryId":"zz","tokensBefore":5}` + "\n" +
			msgLine("d0000001", "c0000002", "after", "") + "\n"), "", true, ""},
		{"damaged message the answer skips, away from its parent", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" +
			`{"type":"thinking_level_change","id":"b0000001","parentId":"a0000001","timestamp":"2026-01-02T03:04:05.000Z","thinkingLevel":"high"}` + "\n" +
			`{"type":"message","id":"m0000001","parentId":"a0000001","timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"user","content":[7]}}` + "\n" +
			`{"type":"model_change","id":"c0000001","parentId":"m0000001","timestamp":"2026-01-02T03:04:05.000Z","provider":"p","modelId":"m"}` + "\n" +
			`{"type":"compaction","id":"c0000002","parentId":"c0000001","timestamp":"2026-01-02T03:04:06.000Z","summary":"s","firstKeptEntryId":"zz","tokensBefore":5}` + "\n" +
			msgLine("d0000001", "c0000002", "after", "") + "\n"), "", false, "block 0: a number"},
		{"header only", []byte(header + "\n"), "", true, ""},
		{"not a session", []byte(`{"type":"message"}` + "\n"), "", false, "header"},
		{"long message line", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000002", "a0000001", big, "") + "\n" + msgLine("a0000003", "a0000002", "three", "") + "\n"), "", true, ""},
		{"long message line last, no newline", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000002", "a0000001", big, `,"fence":3`)), "", true, ""},
		{"long custom line", []byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" +
			`{"type":"custom","customType":"x","data":"` + big + `","id":"a0000002","parentId":"a0000001","timestamp":"2026-01-02T03:04:05.000Z"}` + "\n" + msgLine("a0000003", "a0000002", "three", "") + "\n"), "", true, ""},
		{"given leaf", join(base), mid.ID, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeTemp(t, tc.data)
			st := sameContextDamage(t, p, tc.leaf, tc.name == "damaged body off the path" || strings.HasPrefix(tc.name, "damaged message the answer skips"))
			if st.Fast != tc.fast || !strings.Contains(st.Fallback, tc.fallback) {
				t.Errorf("fast %v, fallback %q; want fast %v, fallback containing %q", st.Fast, st.Fallback, tc.fast, tc.fallback)
			}
		})
	}
}

// TestWriteContextPibotLines: the lines pibot writes (chat metadata and a
// cluster fence) take the fast path.
func TestWriteContextPibotLines(t *testing.T) {
	dir := t.TempDir()
	s, err := session.CreateFile(dir, session.Header{Cwd: "/w"}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"}, session.Options{Fence: 4})
	if err != nil {
		t.Fatal(err)
	}
	parent := s.Tree().Leaf()
	for i := range 20 {
		m := llm.UserText(fmt.Sprintf("message %d", i), int64(i))
		if i%2 == 1 {
			m = llm.Message{Role: llm.RoleAssistant, Provider: "p", Model: fmt.Sprint("m", i), Content: []llm.Content{llm.TextBlock("ok")}, Timestamp: int64(i)}
		}
		e, err := s.Append(session.Entry{Type: session.TypeMessage, ParentID: parent, Message: &m, Pibot: &session.Meta{Loc: "slack:C1", Msg: fmt.Sprint("ts", i)}}, session.SyncAlways)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(e.Raw, []byte(`"fence":4,"message":{`)) {
			t.Fatalf("fence not in front of the message: %s", e.Raw)
		}
		parent = e.ID
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := sameContext(t, s.Path(), "")
	if !st.Fast {
		t.Fatalf("fell back: %s", st.Fallback)
	}
}

// FuzzWriteContext: on any file the full loader reads, WriteContext
// writes the same bytes (or fails the same way), for the default leaf and
// for every entry.
func FuzzWriteContext(f *testing.F) {
	f.Add([]byte(header + "\n" + msgLine("a0000001", "", "one", "") + "\n" + msgLine("a0000002", "a0000001", "two", `,"fence":2`) + "\n"))
	f.Add([]byte(header + "\n" + `{"type":"thinking_level_change","id":"t1","parentId":null,"timestamp":"x","thinkingLevel":"high"}` + "\n" +
		`{"type":"message","id":"m1","parentId":"t1","timestamp":"2026-01-02T03:04:05.000Z","message":{"role":"assistant","provider":"p","model":"m","content":[]}}` + "\n" +
		`{"type":"compaction","id":"c1","parentId":"m1","timestamp":"2026-01-02T03:04:05.000Z","summary":"s","firstKeptEntryId":"m1","tokensBefore":3}` + "\n" +
		`{"type":"custom_message","customType":"k","content":"hi","display":true,"id":"u1","parentId":"c1","timestamp":"2026-01-02T03:04:05.000Z"}` + "\n" +
		`{"type":"branch_summary","id":"b1","parentId":"u1","timestamp":"2026-01-02T03:04:05.000Z","fromId":"m1","summary":"went"}` + "\n"))
	f.Add([]byte(header + "\n\n" + msgLine("a0000001", "", "one", "") + "\r\n" + msgLine("a0000001", "", "dup", "") + "\n" + msgLine("a0000003", "a0000001", "x", "")))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := session.OpenFile(p, session.Options{ReadOnly: true})
		if err != nil {
			return
		}
		rep := s.Report()
		ids := []string{""}
		for _, e := range s.Tree().Entries() {
			ids = append(ids, e.ID)
		}
		s.Close()
		for _, id := range ids {
			// Damage the answer does not depend on goes unreported by the
			// fast path (see WriteContext); the answer is the same.
			sameContextDamage(t, p, id, !rep.Clean())
		}
	})
}

// TestWriteContextMutations runs FuzzWriteContext's property over files
// mutated at random (fixed seed): lines dropped, repeated, moved, cut,
// re-parented, fenced, with bytes changed; every file the full loader
// reads must get the same answer.
func TestWriteContextMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	base := lines(generated(t, 120, 9))
	ids := make([]string, 0, len(base))
	for _, l := range base[1:] {
		var e struct{ ID string }
		_ = json.Unmarshal(l, &e)
		ids = append(ids, e.ID)
	}
	dir := t.TempDir()
	compared, fast := 0, 0
	files := 150
	if testing.Short() {
		files = 40 // scripts/test's quick loop; scripts/test --all runs 150
	}
	for iter := range files {
		ls := make([][]byte, len(base))
		for i := range base {
			ls[i] = bytes.Clone(base[i])
		}
		for range 1 + r.IntN(3) {
			i := 1 + r.IntN(len(ls)-1)
			switch r.IntN(7) {
			case 0:
				ls = append(ls[:i:i], ls[i+1:]...)
			case 1:
				ls = append(ls[:i:i], append([][]byte{bytes.Clone(ls[r.IntN(len(ls))])}, ls[i:]...)...)
			case 2:
				j := 1 + r.IntN(len(ls)-1)
				ls[i], ls[j] = ls[j], ls[i]
			case 3:
				ls[i] = ls[i][:r.IntN(len(ls[i]))]
			case 4:
				ls[i] = bytes.Replace(ls[i], []byte(`"parentId":"`), []byte(`"parentId":"`+ids[r.IntN(len(ids))]+`","x":"`), 1)
			case 5:
				ls[i] = append(bytes.TrimSuffix(ls[i], []byte("}")), []byte(fmt.Sprintf(`,"fence":%d}`, r.IntN(3)))...)
			case 6:
				if len(ls[i]) > 0 {
					ls[i][r.IntN(len(ls[i]))] = `{}[]":,\ax0`[r.IntN(11)]
				}
			}
		}
		p := filepath.Join(dir, fmt.Sprintf("m%d.jsonl", iter))
		if err := os.WriteFile(p, join(ls), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := session.OpenFile(p, session.Options{ReadOnly: true})
		if err != nil {
			continue
		}
		clean := s.Report().Clean()
		leaves := []string{"", s.Tree().Leaf()}
		if es := s.Tree().Entries(); len(es) > 0 {
			leaves = append(leaves, es[r.IntN(len(es))].ID)
		}
		s.Close()
		if clean {
			compared++
		}
		for _, leaf := range leaves {
			if st := sameContextDamage(t, p, leaf, !clean); st.Fast {
				fast++
			}
		}
	}
	t.Logf("%d clean files of %d, %d answers the fast way", compared, files, fast)
	if compared < files/3 || fast < files/3 {
		t.Fatalf("only %d of %d mutated files were clean, %d answers the fast way", compared, files, fast)
	}
}

// TestWriteContextPiMigrated: files pi migrated from versions 1 and 2
// (pi appends "id" and "parentId" after the message) answer the fast
// way, at every leaf, exactly what the full loader and pi answer. pi's
// answers are NAME.context.jsonl; version-1 leaves are found by position
// (pi gave the entries new ids when it migrated them).
func TestWriteContextPiMigrated(t *testing.T) {
	dir := vectorsDir(t)
	for _, name := range []string{"legacy-v1", "legacy-v2"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name+".migrated.jsonl")
			s, err := session.OpenFile(p, session.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			entries := s.Tree().Entries()
			s.Close()
			data, err := os.ReadFile(filepath.Join(dir, name+".context.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, l := range lines(data) {
				var want struct {
					Leaf          *string
					Index         *int
					Messages      any
					ThinkingLevel string
					Model         any
				}
				if err := json.Unmarshal(l, &want); err != nil {
					t.Fatal(err)
				}
				leaf := ""
				switch {
				case want.Leaf == nil:
				case name == "legacy-v1":
					leaf = entries[*want.Index].ID
				default:
					leaf = *want.Leaf
				}
				st := sameContext(t, p, leaf)
				if !st.Fast {
					t.Errorf("leaf %q: fell back: %s", leaf, st.Fallback)
				}
				var got bytes.Buffer
				if _, err := session.WriteContext(&got, p, leaf, nil); err != nil {
					t.Fatal(err)
				}
				var ctx struct {
					Messages      any
					ThinkingLevel string
					Model         any
				}
				if err := json.Unmarshal(got.Bytes(), &ctx); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(ctx.Messages, want.Messages) || ctx.ThinkingLevel != want.ThinkingLevel || !reflect.DeepEqual(ctx.Model, want.Model) {
					t.Fatalf("leaf %q: differs from pi's context:\n got %.300s\nwant %.300s", leaf, got.Bytes(), l)
				}
				n++
			}
			if n != len(entries)+1 {
				t.Fatalf("%d contexts compared, want one per entry and the default leaf (%d)", n, len(entries)+1)
			}
		})
	}
}
