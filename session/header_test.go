package session

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// headerFile is a version-3 tree (a1 with two children, a2 a hookMessage)
// under a header whose "version" member is version (raw JSON; "" leaves
// it out), after prefix.
func headerFile(prefix, version string) []byte {
	h := `{"type":"session",`
	if version != "" {
		h += `"version":` + version + `,`
	}
	h += `"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`
	return []byte(prefix + h + "\n" +
		`{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"one","timestamp":1}}` + "\n" +
		`{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"h","content":"two","display":true,"timestamp":2}}` + "\n" +
		`{"type":"message","id":"a3","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"three","timestamp":3}}` + "\n")
}

func writeHeaderFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHeaderVersionLikePi reads "version" as pi 0.73.1 compares it
// (checked with pi itself: "3" is read as 3 and the file is left alone,
// "2" is migrated from version 2), and refuses, naming the line and the
// fix, the values on which pi guesses (a version it cannot compare is
// read as current; "" migrates a tree as a version-1 list).
func TestHeaderVersionLikePi(t *testing.T) {
	for _, tc := range []struct {
		version string
		from    int    // the report's FromVersion; 0: an error
		ids     string // the entry ids after loading
		err     string
	}{
		{`3`, 3, "a1 a2 a3", ""},
		{`"3"`, 3, "a1 a2 a3", ""},
		{`" 3 "`, 3, "a1 a2 a3", ""},
		{`"3.0"`, 3, "a1 a2 a3", ""},
		{`4`, 4, "a1 a2 a3", ""},
		{`1e400`, math.MaxInt32, "a1 a2 a3", ""},
		{`"2"`, 2, "a1 a2 a3", ""},
		{`2.5`, 2, "a1 a2 a3", ""},
		{`null`, 1, "", ""},
		{`"1"`, 1, "", ""},
		{`"abc"`, 0, "", `s.jsonl:1: header "version" is "abc": not a version number; set it to 3`},
		{`""`, 0, "", `header "version" is ""`},
		{`true`, 0, "", `header "version" is true`},
		{`{"v":3}`, 0, "", `header "version" is {"v":3}`},
		{`"0x3"`, 0, "", `header "version" is "0x3"`},
	} {
		t.Run(tc.version, func(t *testing.T) {
			p := writeHeaderFile(t, headerFile("", tc.version))
			s, err := OpenFile(p, Options{ReadOnly: true})
			if tc.from == 0 {
				if err == nil || !strings.Contains(err.Error(), tc.err) || errors.Is(err, ErrNotSession) {
					t.Fatalf("err %v, want one containing %q (and not ErrNotSession)", err, tc.err)
				}
				var b bytes.Buffer
				if _, ferr := WriteContext(&b, p, "", nil); ferr == nil || ferr.Error() != err.Error() {
					t.Fatalf("WriteContext: %v, want the loader's %v", ferr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Report().FromVersion; got != tc.from {
				t.Errorf("FromVersion %d, want %d", got, tc.from)
			}
			var ids []string
			roles := map[string]string{}
			for _, e := range s.Tree().Entries() {
				ids = append(ids, e.ID)
				roles[e.ID] = string(e.Message.Role)
			}
			if tc.ids != "" && strings.Join(ids, " ") != tc.ids {
				t.Errorf("ids %v, want %s (the tree kept)", ids, tc.ids)
			}
			if tc.from == 1 && strings.Join(ids, " ") == "a1 a2 a3" {
				t.Errorf("ids %v: a version-1 file gets new ids", ids)
			}
			if tc.from == 2 && roles["a2"] != "custom" || tc.from >= 3 && roles["a2"] != "hookMessage" {
				t.Errorf("a2's role %q after loading from version %d", roles["a2"], tc.from)
			}
		})
	}
}

// TestLeadingWhiteSpace: pi reads a file as content.trim(), so a byte
// order mark (or other white space) before the header is skipped; it used
// to make the header unreadable ("first entry has type ..."), and the
// gateway then took the file for one that is not a session.
func TestLeadingWhiteSpace(t *testing.T) {
	plain := headerFile("", "3")
	for _, prefix := range []string{"\ufeff", "\ufeff\n", "\n \ufeff\u00a0", "\r\n\ufeff\t"} {
		t.Run(strings.ToValidUTF8(prefix, "?"), func(t *testing.T) {
			p := writeHeaderFile(t, headerFile(prefix, "3"))
			s, err := OpenFile(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			if !s.Report().Clean() || s.Tree().Len() != 3 || s.Tree().Header().ID != "s1" {
				t.Fatalf("report %+v, %d entries, header %+v", s.Report(), s.Tree().Len(), s.Tree().Header())
			}
			s.Close()
			var got, want bytes.Buffer
			var st ContextStats
			if _, err := WriteContext(&got, p, "", &st); err != nil {
				t.Fatal(err)
			}
			if _, err := WriteContext(&want, writeHeaderFile(t, plain), "", nil); err != nil {
				t.Fatal(err)
			}
			if !st.Fast || got.String() != want.String() {
				t.Fatalf("fast %v (%s): %s, want %s", st.Fast, st.Fallback, got.String(), want.String())
			}
			// A writer appends after it; the file stays readable.
			w, err := OpenFile(p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Append(Entry{Type: TypeLabel, TargetID: "a1", ParentID: "a3"}, SyncAlways); err != nil {
				t.Fatal(err)
			}
			w.Close()
			r, err := OpenFile(p, Options{ReadOnly: true})
			if err != nil || r.Tree().Len() != 4 || !r.Report().Clean() {
				t.Fatalf("after an append: %v %+v", err, r.Report())
			}
			r.Close()
		})
	}
	// White space after the first line is not skipped: a BOM there is a
	// damaged line, as in pi.
	p := writeHeaderFile(t, append(headerFile("", "3"), []byte("\ufeff{\"type\":\"label\",\"id\":\"l1\",\"parentId\":\"a3\",\"timestamp\":\"t\",\"targetId\":\"a1\"}\n")...))
	s, err := OpenFile(p, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Tree().Len() != 3 || s.Report().TailBytes == 0 {
		t.Fatalf("%d entries, report %+v", s.Tree().Len(), s.Report())
	}
}
