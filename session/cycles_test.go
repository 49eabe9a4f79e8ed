package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loopFile writes a session whose entries have the given (id, parentId)
// links, "" for null; every entry is a user message naming its id.
func loopFile(t *testing.T, links [][2]string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}` + "\n")
	for i, l := range links {
		parent := "null"
		if l[1] != "" {
			parent = `"` + l[1] + `"`
		}
		b.WriteString(`{"type":"message","id":"` + l[0] + `","parentId":` + parent + `,"timestamp":"2025-01-01T00:00:0` +
			string(rune('0'+i)) + `.000Z","message":{"role":"user","content":[{"type":"text","text":"msg ` + l[0] + ` parentId"}],"timestamp":1}}` + "\n")
	}
	p := filepath.Join(t.TempDir(), "loop.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// piWalkEnds follows parentId links from the last entry the way pi's
// buildSessionContext does and reports whether the walk reaches a root.
func piWalkEnds(t *testing.T, data []byte) bool {
	t.Helper()
	byID := map[string]string{}
	var last string
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if i == 0 {
			continue
		}
		var e struct {
			ID       string  `json:"id"`
			ParentID *string `json:"parentId"`
		}
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		byID[e.ID] = ""
		if e.ParentID != nil {
			byID[e.ID] = *e.ParentID
		}
		last = e.ID
	}
	cur := last
	for steps := 0; steps <= len(byID); steps++ {
		p, ok := byID[cur]
		if !ok || p == "" {
			return true
		}
		cur = p
	}
	return false
}

// TestParentLoops replays files on which pi's context walk never ends: an
// entry that is its own parent, and loops of two and three entries. pibot
// must call them damaged, read them without hanging, and repair them so
// that pi's walk ends too (keeping a .broken copy).
func TestParentLoops(t *testing.T) {
	tests := []struct {
		name  string
		links [][2]string
		cut   map[string]string // entry -> parentId it had
		ctx   int               // messages in the default context after the cut
	}{
		{"self parent", [][2]string{{"a", ""}, {"b", "a"}, {"c", "c"}}, map[string]string{"c": "c"}, 1},
		{"self parent mid-chain", [][2]string{{"a", ""}, {"b", "b"}, {"c", "b"}}, map[string]string{"b": "b"}, 2},
		{"two-entry loop", [][2]string{{"a", ""}, {"b", "c"}, {"c", "b"}}, map[string]string{"b": "c"}, 2},
		{"three-entry loop", [][2]string{{"a", "c"}, {"b", "a"}, {"c", "b"}}, map[string]string{"a": "c"}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loopFile(t, tt.links)
			orig, _ := os.ReadFile(p)
			if piWalkEnds(t, orig) {
				t.Fatal("test file does not loop")
			}
			ro, err := OpenFile(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			rep := ro.Report()
			if rep.Clean() || len(rep.Cycles) != len(tt.cut) {
				t.Fatalf("report %+v: want the loop reported", rep)
			}
			for id, parent := range tt.cut {
				if rep.Cycles[id] != parent {
					t.Fatalf("cycles = %v, want %v", rep.Cycles, tt.cut)
				}
			}
			c, err := ro.Tree().Context("")
			if err != nil || len(c.Messages) != tt.ctx {
				t.Fatalf("context: %d messages, %v; want %d", len(c.Messages), err, tt.ctx)
			}
			n := 0
			var count func([]*Node)
			count = func(ns []*Node) {
				for _, x := range ns {
					n++
					count(x.Children)
				}
			}
			count(ro.Tree().Roots())
			if n != len(tt.links) {
				t.Fatalf("tree shows %d of %d entries", n, len(tt.links))
			}
			if after, _ := os.ReadFile(p); !bytes.Equal(after, orig) {
				t.Fatal("a read-only open changed the file")
			}
			_ = ro.Close()

			w, err := OpenFile(p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			wr := w.Report()
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if wr.BrokenCopy != p+".broken" {
				t.Fatalf("broken copy %q", wr.BrokenCopy)
			}
			if b, _ := os.ReadFile(wr.BrokenCopy); !bytes.Equal(b, orig) {
				t.Fatal(".broken is not the original")
			}
			fixed, _ := os.ReadFile(p)
			if !piWalkEnds(t, fixed) {
				t.Fatalf("pi would still loop on the repaired file:\n%s", fixed)
			}
			// Only the parentId of the cut entries changed.
			ol, fl := bytes.Split(orig, []byte("\n")), bytes.Split(fixed, []byte("\n"))
			if len(ol) != len(fl) {
				t.Fatalf("repaired file has %d lines, original %d", len(fl), len(ol))
			}
			for i := range ol {
				if !bytes.Equal(ol[i], fl[i]) && !bytes.Contains(fl[i], []byte(`"parentId":null,`)) {
					t.Fatalf("line %d changed beyond its parentId:\n%s\n%s", i+1, ol[i], fl[i])
				}
			}
			again, err := OpenFile(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer again.Close()
			if r := again.Report(); !r.Clean() {
				t.Fatalf("repaired file still damaged: %+v", r)
			}
			c2, _ := again.Tree().Context("")
			if len(c2.Messages) != tt.ctx {
				t.Fatalf("context after repair: %d messages, want %d", len(c2.Messages), tt.ctx)
			}
		})
	}
}

func TestWithParent(t *testing.T) {
	raw := []byte(`{"type":"message","id":"x","parentId":"x","message":{"parentId":"keep"}}`)
	if got := string(withParent(raw, "")); got != `{"type":"message","id":"x","parentId":null,"message":{"parentId":"keep"}}` {
		t.Fatalf("withParent null = %s", got)
	}
	if got := string(withParent(raw, "p\"q")); got != `{"type":"message","id":"x","parentId":"p\"q","message":{"parentId":"keep"}}` {
		t.Fatalf("withParent = %s", got)
	}
}

// TestCutLoopKeepsTheMessage: cutting a loop rewrites the entry's
// parentId to null, which moves its message; the context still holds the
// message, byte for byte (the span was stale before: a slice out of range
// or the wrong bytes).
func TestCutLoopKeepsTheMessage(t *testing.T) {
	msg := `{"role":"user","content":[{"type":"text","text":"looped"}],"timestamp":1}`
	data := fuzzHeader + `{"type":"message","id":"a0000002","parentId":"a0000002","timestamp":"2026-01-01T00:00:00.000Z","message":` + msg + "}\n"
	s, err := loadMem([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Tree().Context("")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 1 || string(c.Messages[0]) != msg {
		t.Fatalf("messages %q, want [%s]", c.Messages, msg)
	}
}
