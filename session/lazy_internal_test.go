package session

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLazyScanChunks: a file read in small chunks (lines cut at every
// chunk's end, lines longer than a chunk) is indexed as in one read.
func TestLazyScanChunks(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}` + "\n")
	parent := "null"
	for i := range 200 {
		id := []byte("e0000000")
		id[5], id[6], id[7] = byte('0'+i/100), byte('0'+i/10%10), byte('0'+i%10)
		text := strings.Repeat("x", i*37%900)
		if i%3 == 0 {
			b.WriteString(`{"type":"message","id":"` + string(id) + `","parentId":` + parent + `,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"` + text + `","timestamp":1}}` + "\n")
		} else {
			b.WriteString(`{"type":"custom","customType":"x","data":{"t":"` + text + `"},"id":"` + string(id) + `","parentId":` + parent + `,"timestamp":"2026-01-01T00:00:01.000Z"}` + "\n")
		}
		parent = `"` + string(id) + `"`
	}
	path := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := FileStorage{}.OpenRange(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	scan := func(chunk int) *lazyLoad {
		ld := &lazyLoad{chunk: chunk}
		if err := ld.scan(f, 0, int64(b.Len())); err != nil {
			t.Fatalf("chunk %d: %v", chunk, err)
		}
		return ld
	}
	want := scan(0)
	if len(want.nodes) != 200 {
		t.Fatalf("%d entries, want 200", len(want.nodes))
	}
	for _, chunk := range []int{64, 333, 4096} {
		got := scan(chunk)
		if len(got.nodes) != len(want.nodes) || got.lineNo != want.lineNo {
			t.Fatalf("chunk %d: %d entries, %d lines; want %d, %d", chunk, len(got.nodes), got.lineNo, len(want.nodes), want.lineNo)
		}
		for i, n := range got.nodes {
			w := want.nodes[i]
			if n.id != w.id || n.parentID != w.parentID || n.off != w.off || n.size != w.size || n.sum != w.sum ||
				n.line != w.line || n.index != w.index || n.msg != w.msg || !bytes.Equal(n.raw, w.raw) {
				t.Fatalf("chunk %d: entry %d differs", chunk, i)
			}
			line := b.Bytes()[n.off : n.off+int64(n.size)]
			if lineSum(line) != n.sum || (n.typ == TypeMessage) != (n.raw == nil) {
				t.Fatalf("chunk %d: entry %d: line or kept bytes wrong", chunk, i)
			}
		}
	}
}

// TestIndexesBounds: an Indexes keeps closed sessions' indexes of at
// least min entries, at most max in all, dropping the oldest first; an
// index loaded for the Open about to follow is kept whatever its size.
func TestIndexesBounds(t *testing.T) {
	kept := func(n int, closed bool) *keptIndex {
		if closed {
			return &keptIndex{flat: &flatIndex{ents: make([]flatEntry, n)}}
		}
		return &keptIndex{tree: &Tree{nodes: make([]*node, n)}}
	}
	type step struct {
		path   string
		n      int
		closed bool
	}
	for _, tc := range []struct {
		name    string
		steps   []step
		want    []string // kept paths
		entries int
	}{
		{"too small", []step{{"a", 9, true}}, nil, 0},
		{"too large", []step{{"a", 101, true}}, nil, 0},
		{"kept", []step{{"a", 10, true}, {"b", 50, true}}, []string{"a", "b"}, 60},
		{"oldest dropped", []step{{"a", 40, true}, {"b", 40, true}, {"c", 40, true}}, []string{"b", "c"}, 80},
		{"replaced", []step{{"a", 40, true}, {"a", 60, true}}, []string{"a"}, 60},
		{"for an open: any size", []step{{"a", 40, true}, {"b", 5, false}, {"c", 150, false}}, []string{"c"}, 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndexes(10, 100)
			for _, s := range tc.steps {
				x.keep(s.path, kept(s.n, s.closed), s.closed)
			}
			var got []string
			for _, p := range []string{"a", "b", "c"} {
				if x.kept[p] != nil {
					got = append(got, p)
				}
			}
			if n, e := x.Len(); strings.Join(got, ",") != strings.Join(tc.want, ",") || e != tc.entries || n != len(tc.want) {
				t.Fatalf("kept %v (%d entries), want %v (%d)", got, e, tc.want, tc.entries)
			}
			if k := x.take("a"); (k != nil) != slices.Contains(tc.want, "a") {
				t.Fatalf("take a: %v", k)
			}
		})
	}
}
