package tools

import (
	"os"
	"path/filepath"
	"testing"
)

func TestEdit(t *testing.T) {
	cases := []struct {
		name, file, args string
		want, details    string
		isErr            bool
		after            string
	}{
		{name: "pi golden", file: "line one\nline two\nline three\n",
			args: `{"path":"f.txt","edits":[{"oldText":"line two","newText":"line 2"}]}`,
			want: "Successfully replaced 1 block(s) in f.txt.", details: `{"diff":" 1 line one\n-2 line two\n+2 line 2\n 3 line three","firstChangedLine":2}`,
			after: "line one\nline 2\nline three\n"},
		{name: "not found", file: "line one\n", args: `{"path":"f.txt","edits":[{"oldText":"line seven","newText":"line 7"}]}`,
			want: "Could not find the exact text in f.txt. The old text must match exactly including all whitespace and newlines.", isErr: true},
		{name: "not found multi", file: "a\nb\n", args: `{"path":"f.txt","edits":[{"oldText":"a","newText":"A"},{"oldText":"zz","newText":"Z"}]}`,
			want: "Could not find edits[1] in f.txt. The oldText must match exactly including all whitespace and newlines.", isErr: true},
		{name: "duplicate", file: "x\nx\n", args: `{"path":"f.txt","edits":[{"oldText":"x","newText":"y"}]}`,
			want: "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide more context to make it unique.", isErr: true},
		{name: "duplicate multi", file: "a\nx\nx\n", args: `{"path":"f.txt","edits":[{"oldText":"a","newText":"b"},{"oldText":"x","newText":"y"}]}`,
			want: "Found 2 occurrences of edits[1] in f.txt. Each oldText must be unique. Please provide more context to make it unique.", isErr: true},
		{name: "overlap", file: "abcdef\n", args: `{"path":"f.txt","edits":[{"oldText":"cde","newText":"X"},{"oldText":"abcd","newText":"Y"}]}`,
			want: "edits[1] and edits[0] overlap in f.txt. Merge them into one edit or target disjoint regions.", isErr: true},
		{name: "empty oldText", file: "a\n", args: `{"path":"f.txt","edits":[{"oldText":"","newText":"b"}]}`,
			want: "oldText must not be empty in f.txt.", isErr: true},
		{name: "empty oldText multi", file: "a\n", args: `{"path":"f.txt","edits":[{"oldText":"a","newText":"b"},{"oldText":"","newText":"b"}]}`,
			want: "edits[1].oldText must not be empty in f.txt.", isErr: true},
		{name: "no change", file: "a\n", args: `{"path":"f.txt","edits":[{"oldText":"a","newText":"a"}]}`,
			want: "No changes made to f.txt. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.", isErr: true},
		{name: "no change multi", file: "a\nb\n", args: `{"path":"f.txt","edits":[{"oldText":"a","newText":"a"},{"oldText":"b","newText":"b"}]}`,
			want: "No changes made to f.txt. The replacements produced identical content.", isErr: true},
		{name: "no edits", file: "a\n", args: `{"path":"f.txt","edits":[]}`,
			want: "Edit tool input is invalid. edits must contain at least one replacement.", isErr: true},
		{name: "missing file", args: `{"path":"f.txt","edits":[{"oldText":"a","newText":"b"}]}`,
			want: "Could not edit file: f.txt. Error code: ENOENT.", isErr: true},
		{name: "multi edit", file: "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n",
			args:    `{"path":"f.txt","edits":[{"oldText":"1\n2\n","newText":"1\ntwo\n"},{"oldText":"11","newText":"eleven"}]}`,
			want:    "Successfully replaced 2 block(s) in f.txt.",
			details: `{"diff":"  1 1\n- 2 2\n+ 2 two\n  3 3\n  4 4\n  5 5\n  6 6\n  7 7\n  8 8\n  9 9\n 10 10\n-11 11\n+11 eleven\n 12 12","firstChangedLine":2}`,
			after:   "1\ntwo\n3\n4\n5\n6\n7\n8\n9\n10\neleven\n12\n"},
		{name: "crlf and bom kept", file: "\uFEFFa\r\nb\r\nc\r\n", args: `{"path":"f.txt","edits":[{"oldText":"b\nc","newText":"B\nC"}]}`,
			want: "Successfully replaced 1 block(s) in f.txt.", after: "\uFEFFa\r\nB\r\nC\r\n"},
		{name: "fuzzy quotes and dashes", file: "say \u201chi\u201d \u2014 it\u2019s\n", args: `{"path":"f.txt","edits":[{"oldText":"say \"hi\" - it's","newText":"ok"}]}`,
			want: "Successfully replaced 1 block(s) in f.txt.", after: "ok\n"},
		{name: "fuzzy trailing whitespace rewrites file", file: "keep  \nfoo   \nbar\n", args: `{"path":"f.txt","edits":[{"oldText":"foo\nbar","newText":"baz"}]}`,
			want: "Successfully replaced 1 block(s) in f.txt.", after: "keep\nbaz\n"},
		{name: "legacy oldText newText", file: "a\nb\n", args: `{"path":"f.txt","oldText":"b","newText":"c"}`,
			want: "Successfully replaced 1 block(s) in f.txt.", after: "a\nc\n"},
		{name: "edits as JSON string", file: "a\nb\n", args: `{"path":"f.txt","edits":"[{\"oldText\":\"a\",\"newText\":\"z\"}]"}`,
			want: "Successfully replaced 1 block(s) in f.txt.", after: "z\nb\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{}
			if c.file != "" {
				files["f.txt"] = c.file
			}
			s, dir := newSet(t, false, files)
			got, isErr, det := call(t, s, "edit", c.args)
			if got != c.want || isErr != c.isErr {
				t.Fatalf("got (%v) %q\nwant (%v) %q", isErr, got, c.isErr, c.want)
			}
			if c.details != "" && det != c.details {
				t.Errorf("details:\n got %s\nwant %s", det, c.details)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "f.txt"))
			want := c.after
			if c.isErr {
				want = c.file
			}
			if string(b) != want {
				t.Errorf("file = %q, want %q", b, want)
			}
		})
	}
}

func TestGenerateDiffGaps(t *testing.T) {
	old := lines(20, func(i int) string { return "l" + itoa(i) }) + "\n"
	updated := lines(20, func(i int) string {
		if i == 10 {
			return "X"
		}
		return "l" + itoa(i)
	}) + "\n"
	diff, first := generateDiff(old, updated, 4)
	want := "    ...\n  6 l6\n  7 l7\n  8 l8\n  9 l9\n-10 l10\n+10 X\n 11 l11\n 12 l12\n 13 l13\n 14 l14\n    ..."
	if diff != want || first != 10 {
		t.Errorf("diff (%d):\n%s\nwant:\n%s", first, diff, want)
	}
	// Goldens from pi 0.73.1's generateDiffString.
	for _, c := range []struct {
		a, b, want string
		first      int
	}{
		{"a\nb", "a\nb\nc", " 1 a\n-2 b\n+2 b\n+3 c", 2},
		{"x\ny\nz\n", "y\nq\nz\nw\n", "-1 x\n 2 y\n+2 q\n 3 z\n+4 w", 1},
	} {
		if d, f := generateDiff(c.a, c.b, 4); d != c.want || f != c.first {
			t.Errorf("diff(%q, %q) = %q, %d; want %q, %d", c.a, c.b, d, f, c.want, c.first)
		}
	}
}

// TestEditDirectory keeps pi's error for a directory: access passes, the
// read fails.
func TestEditDirectory(t *testing.T) {
	s, dir := newSet(t, false, nil)
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, isErr, _ := call(t, s, "edit", `{"path":"d","edits":[{"oldText":"a","newText":"b"}]}`); !isErr || got != "EISDIR: illegal operation on a directory, read" {
		t.Errorf("edit d: %q", got)
	}
}
