package chat

import (
	"slices"
	"strings"
	"testing"
)

// splitTwice is Split as it was before its one-measure path: the text
// measured by split, then every chunk measured again. Split must cut
// every text exactly as it does.
func splitTwice(d Dialect, md string, limit int) []string {
	src := string(normalize(md))
	if strings.TrimSpace(src) == "" {
		return nil
	}
	s := &splitter{d: d, p: newParser()}
	defs := refDefs(s.p, src)
	chunks := s.split(src, limit)
	if defs == "" && limit < minLimit {
		return chunks
	}
	var out []string
	for _, c := range chunks {
		if defs != "" {
			c += "\n\n" + defs
		}
		if limit >= minLimit && s.measure(c) > limit {
			out = append(out, s.degrade(c, limit)...)
			continue
		}
		out = append(out, c)
	}
	return out
}

// streamedReplies are replies as a model streams them: every prefix of
// each is split while it grows.
var streamedReplies = []string{
	"Hello! Here is the answer you asked for.\n\nIt has **two** paragraphs & a [link](https://example.com).",
	"\n\n  leading blank lines, trailing blanks  \n\n\t",
	"```go\nfmt.Println(\"unclosed fence\")\n",
	"see [the docs][d]\n\n[d]: https://example.com/docs\n\nand more text after it",
	"- one\n- two\n  - nested *three*\n\n> quoted\n> text\n\n| a | b |\n|---|---|\n| 1 | 2 |",
	"line one\r\nline two\rline three \x1b[31mred\x00 " + "\xff" + " end",
	"emoji 😀😀😀 and <html> & entities; ~~strike~~ _under_ `code`",
	strings.Repeat("A sentence that goes on. ", 4) + "\n\n" + strings.Repeat("word ", 12),
}

// TestSplitMeasuredOnceCutsAsBefore: for every prefix of streamed replies,
// in every dialect and at limits below, around and above the text's size,
// Split returns what measuring twice returned.
func TestSplitMeasuredOnceCutsAsBefore(t *testing.T) {
	dialects := []Dialect{DialectPlain, DialectMarkdown, DialectSlack, DialectTelegram, DialectDiscord, DialectANSI}
	for _, d := range dialects {
		sp := NewSplitter(d)
		for _, reply := range streamedReplies {
			for end := range len(reply) + 1 {
				md := reply[:end]
				for _, limit := range []int{8, 60, 4000} {
					got, want := sp.Split(md, limit), splitTwice(d, md, limit)
					if !slices.Equal(got, want) {
						t.Fatalf("%s, limit %d, %q:\n got %q\nwant %q", d, limit, md, got, want)
					}
				}
			}
		}
	}
}

// TestSplitFittingTextNotCopied: a clean reply that fits one message is
// split, at every edit of a stream, with one allocation (the result) in the
// markdown dialect, and with no more than one render's allocations and the
// result in the others (it used to be rendered twice and copied four
// times).
func TestSplitFittingTextNotCopied(t *testing.T) {
	md := "Here is the answer: **bold**, _em_ and `code`.\n\nA second paragraph with a [link](https://example.com)."
	for _, d := range []Dialect{DialectMarkdown, DialectSlack, DialectTelegram} {
		sp := NewSplitter(d)
		if got := sp.Split(md, 4000); len(got) != 1 {
			t.Fatalf("%s: %d chunks, want 1", d, len(got))
		}
		split := testing.AllocsPerRun(50, func() { sp.Split(md, 4000) })
		render := testing.AllocsPerRun(50, func() { renderWith(sp.p, md, d) })
		if split > render+1 {
			t.Errorf("%s: Split allocates %.0f times, one render %.0f", d, split, render)
		}
		if d == DialectMarkdown && split != 1 {
			t.Errorf("markdown: Split allocates %.0f times, want 1", split)
		}
	}
}
