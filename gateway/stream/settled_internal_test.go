package stream

import (
	"strings"
	"testing"
)

// TestSettled: the head of a message being written that an append-only
// stream may show ends at a word boundary and holds back what could still
// change its rendering. want is the head, trimmed of trailing space.
func TestSettled(t *testing.T) {
	for _, tc := range []struct {
		name, md, want string
	}{
		// Prose.
		{"empty", "", ""},
		{"one word being written", "Hel", ""},
		{"words", "Hello wor", "Hello"},
		{"sentence", "The answer is 42. It follo", "The answer is 42. It"},
		{"trailing space", "The answer is ", "The answer is"},
		{"second line", "First line\nsecond li", "First line\nsecond"},
		{"paragraphs", "One.\n\nTwo thr", "One.\n\nTwo"},
		{"no spaces", "日本語の文です。次の", "日本語の文です。"},
		{"escaped star", `a \*b c`, `a \*b`},
		{"star between spaces", "5 * 3 is 15 and mo", "5 * 3 is 15 and"},
		{"snake case", "call snake_case_name now", "call snake_case_name"},

		// Code fences.
		{"open fence", "Run:\n```sh\ngo test ./...\n", "Run:"},
		{"fence line being written", "Run:\n```s", "Run:"},
		{"fence of tildes", "Run:\n~~~\nx y\n", "Run:"},
		{"closing fence being written", "Run:\n```sh\ngo test\n```", "Run:"},
		{"closed fence", "Run:\n```sh\ngo test\n```\nThen it pas", "Run:\n```sh\ngo test\n```\nThen it"},
		{"blank line in a fence", "Run:\n```\na\n\nb c\n", "Run:"},
		{"fence in a list", "- run:\n  ```\n  x y\n", "- run:"},
		{"fence in a quote", "> run:\n> ```\n> x y\n", "> run:"},

		// Tables.
		{"header being written", "Results:\n| name | sco", "Results:"},
		{"header complete", "Results:\n| name | score |\n", "Results:"},
		{"delimiter being written", "Results:\n| name | score |\n|---", "Results:"},
		{"header and delimiter", "Results:\n| name | score |\n|---|---:|\n| ann | 1", "Results:\n| name | score |\n|---|---:|"},
		{"rows", "| a | b |\n| - | - |\n| 1 | 2 |\n| 3 | 4", "| a | b |\n| - | - |\n| 1 | 2 |"},
		{"table ends at a blank line", "| a |\n| - |\n| 1 |\n\nDone and du", "| a |\n| - |\n| 1 |\n\nDone and"},
		{"pipe in prose", "use a | b to pipe it", "use a"},
		{"pipe in prose, next line", "use a | b to pipe\nand then wr", "use a | b to pipe\nand then"},
		{"pipe in code", "use `a | b` to pipe it", "use `a | b` to pipe"},
		{"header without pipes at the edges", "a | b\n--|--\n", "a | b\n--|--"},

		// Emphasis and strikethrough.
		{"open emphasis", "This is *very impor", "This is"},
		{"closed emphasis", "This is *very* impor", "This is *very*"},
		{"open strong", "Note: **do not", "Note:"},
		{"strong closed", "Note: **do not** forg", "Note: **do not**"},
		{"underscore", "an _open one and", "an"},
		{"emphasis over lines", "a *b\nc* d e", "a *b\nc* d"},
		{"unclosed at paragraph end", "a *b c\n\nd e", "a *b c\n\nd"},
		{"strikethrough", "it is ~~wrong and", "it is"},
		{"strikethrough closed", "it is ~~wrong~~ now", "it is ~~wrong~~"},
		{"nested", "a **b *c* d** e", "a **b *c* d**"},
		{"too many openers hold the paragraph", strings.Repeat("*a ", 70) + strings.Repeat("a* ", 70) + "b c", ""},
		{"too many openers, next paragraph", strings.Repeat("*a ", 70) + "\n\nb c", strings.Repeat("*a ", 70) + "\n\nb"},

		// Code spans.
		{"open code span", "use `go vet ./", "use"},
		{"closed code span", "use `go vet` now", "use `go vet`"},
		{"double backticks", "use ``a ` b`` now", "use ``a ` b``"},

		// Links and images.
		{"open link text", "see [the docs for", "see"},
		{"open link destination", "see [docs](https://x.y/a b", "see"},
		{"closed link", "see [the docs](https://x.y/a) now", "see [the docs](https://x.y/a)"},
		{"brackets without link", "x [1] and y", "x [1] and"},
		{"image", "![a cat](c.png) is cu", "![a cat](c.png) is"},
		{"parentheses in destination", "[w](https://e.org/A_(b)) ok", "[w](https://e.org/A_(b))"},

		// Lists, quotes, headings.
		{"bullet alone", "Steps:\n- ", "Steps:"},
		{"bullet with a word being written", "Steps:\n- Ins", "Steps:"},
		{"bullet with words", "Steps:\n- Install the", "Steps:\n- Install"},
		{"ordered marker", "Steps:\n1. ", "Steps:"},
		{"ordered with words", "Steps:\n12. Run it", "Steps:\n12. Run"},
		{"star bullet", "* first item\n* sec", "* first item"},
		{"nested list", "- a\n  - b c", "- a\n  - b"},
		{"task list", "- [ ] write it", "- [ ] write"},
		{"quote", "> quoted text he", "> quoted text"},
		{"heading", "## Getting sta", "## Getting"},
		{"open emphasis ends with the heading", "# A *b\nc d", "# A *b\nc"},
		{"thematic break being written", "Text.\n\n*** and", "Text."},
		{"number, not a marker", "1986 was a year", "1986 was a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.TrimRight(tc.md[:settled(tc.md)], " \t\r\n")
			if got != tc.want {
				t.Errorf("settled(%q) = %q, want %q", tc.md, got, tc.want)
			}
		})
	}
}

// TestSettledGrows: as a message grows, each settled head extends the one
// before, and no head shows half a code block.
func TestSettledGrows(t *testing.T) {
	md := "Here is *the* plan, in [three](https://x.y) steps:\n\n" +
		"1. Install **it**.\n2. Run:\n   ```sh\n   pibot serve\n   ```\n3. Check the table:\n\n" +
		"| step | time |\n|------|-----:|\n| one | 1s |\n| two | 2s |\n\n" +
		"That is _all_ there is to ~~say~~ it. 最後です。"
	prev := ""
	for i := range len(md) + 1 {
		head := md[:settled(md[:i])]
		if !strings.HasPrefix(head, prev) {
			t.Fatalf("at %d the head %q does not extend %q", i, head, prev)
		}
		if strings.Count(head, "```")%2 != 0 {
			t.Fatalf("at %d the head shows an open code block: %q", i, head)
		}
		prev = head
	}
	if prev != md {
		t.Errorf("the whole message settles to %q", prev)
	}
}

// FuzzSettledGrows: whatever the message, the settled head of a longer
// prefix extends the settled head of a shorter one, and never ends inside
// a code block.
func FuzzSettledGrows(f *testing.F) {
	for _, s := range []string{
		"a *b* c\n\n| x | y |\n|---|---|\n| 1 | 2 |\n\ndone",
		"```go\nx := `a`\n```\ntext [l](u) ~~s~~ _e_",
		"- a\n  - b *c\n- d* e\n\n# h *i\n> q `c",
		"a | b\n--|--\nc | d\n",
		"x\n| a |\n|-x\n",
		// A line with a "|" above a fence: it is prose once the fence
		// line begins.
		"|]`]`):)\n~~~#*。\t\n~#-(a",
		// A line that starts like a fence but is not one (a backtick in
		// its info string) is not cut: cut short it would be one.
		">:``` #:~[\n```\\1.:(](a 。|```[-\n[|1.a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		prev := ""
		for i := range len(md) + 1 {
			head := md[:settled(md[:i])]
			if !strings.HasPrefix(head, prev) {
				t.Fatalf("at %d the head %q does not extend %q", i, head, prev)
			}
			if openFence(head) != "" {
				t.Fatalf("at %d the head ends inside a code block: %q", i, head)
			}
			prev = head
		}
	})
}
