package tools

import (
	"strings"
	"testing"
)

func TestGrepFindLs(t *testing.T) {
	files := map[string]string{
		"a.go":          "package a\nfunc A() {}\n",
		"src/b.go":      "package b\r\nfunc B() {}\r\n",
		"src/b_test.go": "package b\nfunc TestB() {}\n",
		".hidden/c.txt": "func hidden\n",
		".git/config":   "func git\n",
		"long.txt":      strings.Repeat("é", 600) + " func\n",
		"ctx.txt":       "one\ntwo\nthree func\nfour\n",
		"Zeta.md":       "",
		"empty/.keep":   "",
		"many/x.txt":    "",
		"bin.dat":       "func\x00\x01",
	}
	s, dir := newSet(t, false, files)
	cases := []struct {
		tool, args, want string
		isErr            bool
	}{
		{"grep", `{"pattern":"func B|TestB"}`, "src/b.go:2: func B() {}\nsrc/b_test.go:2: func TestB() {}", false},
		{"grep", `{"pattern":"FUNC A","ignoreCase":true}`, "a.go:2: func A() {}", false},
		{"grep", `{"pattern":"A()","literal":true}`, "a.go:2: func A() {}", false},
		{"grep", `{"pattern":"func","glob":"*_test.go"}`, "src/b_test.go:2: func TestB() {}", false},
		{"grep", `{"pattern":"three","path":"ctx.txt","context":1}`, "ctx.txt-2- two\nctx.txt:3: three func\nctx.txt-4- four", false},
		{"grep", `{"pattern":"func","limit":2}`, ".hidden/c.txt:1: func hidden\na.go:2: func A() {}\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]", false},
		{"grep", `{"pattern":"func","path":"long.txt"}`, "long.txt:1: " + strings.Repeat("é", 500) + "... [truncated]\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]", false},
		{"grep", `{"pattern":"nothing-here"}`, "No matches found", false},
		{"grep", `{"pattern":"x","path":"nope"}`, "Path not found: " + dir + "/nope", true},
		{"find", `{"pattern":"*.go"}`, "a.go\nsrc/b.go\nsrc/b_test.go", false},
		{"find", `{"pattern":"src/**/*_test.go"}`, "src/b_test.go", false},
		{"find", `{"pattern":"*.txt","limit":2}`, ".hidden/c.txt\nctx.txt\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]", false},
		{"find", `{"pattern":"src"}`, "src/", false},
		{"find", `{"pattern":"*.none"}`, "No files found matching pattern", false},
		{"ls", `{}`, ".git/\n.hidden/\na.go\nbin.dat\nctx.txt\nempty/\nlong.txt\nmany/\nsrc/\nZeta.md", false},
		{"ls", `{"path":"src","limit":1}`, "b_test.go\n\n[1 entries limit reached. Use limit=2 for more]", false},
		{"ls", `{"path":"many/x.txt"}`, "Not a directory: " + dir + "/many/x.txt", true},
		{"ls", `{"path":"missing"}`, "Path not found: " + dir + "/missing", true},
		{"ls", `{"path":"many"}`, "x.txt", false},
	}
	for _, c := range cases {
		got, isErr, _ := call(t, s, c.tool, c.args)
		if got != c.want || isErr != c.isErr {
			t.Errorf("%s %s:\n got (%v) %q\nwant (%v) %q", c.tool, c.args, isErr, trim(got), c.isErr, trim(c.want))
		}
	}
	if _, _, det := call(t, s, "grep", `{"pattern":"func","limit":1}`); det != `{"matchLimitReached":1}` {
		t.Errorf("grep details %s", det)
	}
}

func TestCollateMatchesLocaleCompare(t *testing.T) {
	// Order produced by Node's localeCompare on lowercased names.
	want := []string{".git", ".hidden", "a_b", "a-b", "a.go", "a1", "ab", "b_test.go", "b.go", "Zeta.md"}
	for i := 1; i < len(want); i++ {
		if collate(strings.ToLower(want[i-1]), strings.ToLower(want[i])) >= 0 {
			t.Errorf("%q should sort before %q", want[i-1], want[i])
		}
	}
}
