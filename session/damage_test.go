package session

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func copyVector(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir(t), name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".jsonl")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestMalformedReattach(t *testing.T) {
	p := copyVector(t, "malformed-lines")
	ro, err := OpenFile(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := ro.Report()
	// Line 5 is the non-JSON line; line 11 is the cut line with the lost
	// user message glued onto it. Blank lines are not reported.
	if len(rep.SkippedLines) != 2 || rep.SkippedLines[0].Line != 5 || rep.SkippedLines[1].Line != 11 {
		t.Fatalf("skipped %+v", rep.SkippedLines)
	}
	// dfc7a2ea named the lost entry as parent: it hangs under baadb4d5, the
	// nearest valid entry before it in file order.
	if got := rep.Reattached; len(got) != 1 || got["dfc7a2ea"] != "baadb4d5" {
		t.Fatalf("reattached %v", got)
	}
	if roots := ro.Tree().Roots(); len(roots) != 1 || roots[0].Entry.ID != "085d63c5" {
		t.Fatalf("roots %d", len(roots))
	}
	branch, err := ro.Tree().Branch("")
	if err != nil || len(branch) != 12 || branch[0].ID != "085d63c5" {
		t.Fatalf("default branch %d entries: %v", len(branch), err)
	}
	c, _ := ro.Tree().Context("")
	if len(c.Messages) != 10 || c.ThinkingLevel != "low" {
		t.Fatalf("context: %d messages, thinking %q", len(c.Messages), c.ThinkingLevel)
	}
	before, _ := os.ReadFile(p)
	w, err := OpenFile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := w.Report().RepairEntry
	e, ok := w.Tree().Get(id)
	if !ok || e.CustomType != CustomRepair || !bytes.Contains(e.Data, []byte(`"dfc7a2ea":"baadb4d5"`)) || !bytes.Contains(e.Data, []byte(`[5,11]`)) {
		t.Fatalf("repair entry %+v %s", e, e.Data)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(p)
	if !bytes.HasPrefix(after, before) || bytes.Count(after[len(before):], []byte("\n")) != 1 {
		t.Fatalf("writable open must only append one line:\n%s", after[len(before):])
	}
}

func TestTornTailVector(t *testing.T) {
	p := copyVector(t, "torn-tail")
	before, _ := os.ReadFile(p)
	w, err := OpenFile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := w.Report()
	if !rep.TailTruncated || rep.TailBytes == 0 || rep.BrokenCopy != p+".broken" {
		t.Fatalf("report %+v", rep)
	}
	_ = w.Close()
	after, _ := os.ReadFile(p)
	broken, _ := os.ReadFile(p + ".broken")
	if !bytes.Equal(broken, before) || int64(len(after)) != int64(len(before))-rep.TailBytes || after[len(after)-1] != '\n' {
		t.Fatalf("after %d before %d tail %d", len(after), len(before), rep.TailBytes)
	}
}

func TestNULTail(t *testing.T) {
	p := copyVector(t, "agent-tools")
	good, _ := os.ReadFile(p)
	if err := os.WriteFile(p, append(append([]byte(nil), good...), make([]byte, 512)...), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := OpenFile(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	after, _ := os.ReadFile(p)
	if !bytes.Equal(after, good) || w.Report().TailBytes != 512 {
		t.Fatalf("NUL tail not truncated: %+v", w.Report())
	}
}
