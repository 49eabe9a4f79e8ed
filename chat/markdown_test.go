package chat

import (
	"strings"
	"testing"
)

func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[Dialect]string
	}{
		{"heading", "# Title\n#### Deep", map[Dialect]string{
			DialectTelegram: "<b>Title</b>\n\n<b>Deep</b>",
			DialectSlack:    "*Title*\n\n*Deep*",
			DialectDiscord:  "# Title\n\n**Deep**",
			DialectPlain:    "Title\n\nDeep",
			DialectANSI:     "\x1b[1mTitle\x1b[22m\n\n\x1b[1mDeep\x1b[22m",
		}},
		{"emphasis", "**b** *i* ~~s~~ __u__", map[Dialect]string{
			DialectTelegram: "<b>b</b> <i>i</i> <s>s</s> <b>u</b>",
			DialectSlack:    "*b* _i_ ~s~ *u*",
			DialectDiscord:  "**b** *i* ~~s~~ **u**",
			DialectPlain:    "b i s u",
			DialectANSI:     "\x1b[1mb\x1b[22m \x1b[3mi\x1b[23m \x1b[9ms\x1b[29m \x1b[1mu\x1b[22m",
		}},
		{"nested lists", "- a\n  - b\n1. c", map[Dialect]string{
			DialectTelegram: "• a\n  ◦ b\n\n1. c",
			DialectSlack:    "• a\n  ◦ b\n\n1. c",
			DialectDiscord:  "- a\n  - b\n\n1. c",
			DialectPlain:    "• a\n  ◦ b\n\n1. c",
		}},
		{"code span", "use `a<b>` here", map[Dialect]string{
			DialectTelegram: "use <code>a&lt;b&gt;</code> here",
			DialectSlack:    "use `a&lt;b&gt;` here",
			DialectDiscord:  "use `a<b>` here",
			DialectPlain:    "use a<b> here",
			DialectANSI:     "use \x1b[2ma<b>\x1b[22m here",
		}},
		{"fenced code", "```go\nx := 1 && 2\n```", map[Dialect]string{
			DialectTelegram: "<pre><code class=\"language-go\">x := 1 &amp;&amp; 2</code></pre>",
			DialectSlack:    "```\nx := 1 &amp;&amp; 2\n```",
			DialectDiscord:  "```go\nx := 1 && 2\n```",
			DialectPlain:    "x := 1 && 2",
			DialectANSI:     "    x := 1 && 2",
			DialectMarkdown: "```go\nx := 1 && 2\n```",
		}},
		{"link", "[site](https://e.com/?a=1&b=2)", map[Dialect]string{
			DialectTelegram: `<a href="https://e.com/?a=1&amp;b=2">site</a>`,
			DialectSlack:    "<https://e.com/?a=1&b=2|site>",
			DialectDiscord:  "[site](https://e.com/?a=1&b=2)",
			DialectPlain:    "site (https://e.com/?a=1&b=2)",
			DialectANSI:     "\x1b[4msite\x1b[24m (https://e.com/?a=1&b=2)",
		}},
		{"autolink", "see https://go.dev", map[Dialect]string{
			DialectTelegram: `see <a href="https://go.dev">https://go.dev</a>`,
			DialectSlack:    "see <https://go.dev>",
			DialectDiscord:  "see https://go.dev",
			DialectPlain:    "see https://go.dev",
		}},
		{"table", "| a | b |\n|---|--:|\n| 1 | 22 |", map[Dialect]string{
			DialectTelegram: "<pre>a |  b\n--|---\n1 | 22</pre>",
			DialectSlack:    "```\na |  b\n--|---\n1 | 22\n```",
			DialectDiscord:  "```\na |  b\n--|---\n1 | 22\n```",
			DialectPlain:    "a |  b\n--|---\n1 | 22",
		}},
		{"blockquote", "> quoted\n> text", map[Dialect]string{
			DialectTelegram: "<blockquote>quoted\ntext</blockquote>",
			DialectSlack:    "> quoted\n> text",
			DialectDiscord:  "> quoted\n> text",
			DialectPlain:    "> quoted\n> text",
		}},
		{"html special", "a < b & c > d <i>x</i>", map[Dialect]string{
			DialectTelegram: "a &lt; b &amp; c &gt; d &lt;i&gt;x&lt;/i&gt;",
			DialectSlack:    "a &lt; b &amp; c &gt; d &lt;i&gt;x&lt;/i&gt;",
			DialectDiscord:  "a < b & c > d <i>x</i>",
			DialectPlain:    "a < b & c > d <i>x</i>",
		}},
		{"emoji cjk", "😀 **漢字** 👍🏽", map[Dialect]string{
			DialectTelegram: "😀 <b>漢字</b> 👍🏽",
			DialectSlack:    "😀 *漢字* 👍🏽",
			DialectPlain:    "😀 漢字 👍🏽",
		}},
		{"unterminated fence", "text\n```py\nprint(1 < 2)", map[Dialect]string{
			DialectTelegram: "text\n\n<pre><code class=\"language-py\">print(1 &lt; 2)</code></pre>",
			DialectSlack:    "text\n\n```\nprint(1 &lt; 2)\n```",
			DialectDiscord:  "text\n\n```py\nprint(1 < 2)\n```",
			DialectMarkdown: "text\n```py\nprint(1 < 2)\n```",
		}},
		{"discord escapes", "snake\\_case and a\\*b", map[Dialect]string{
			DialectDiscord: "snake\\_case and a\\*b",
			DialectPlain:   "snake_case and a*b",
		}},
	}
	for _, tt := range tests {
		for d, want := range tt.want {
			if got := Render(tt.in, d); got != want {
				t.Errorf("%s/%s:\n got %q\nwant %q", tt.name, d, got, want)
			}
		}
	}
}

func TestLine(t *testing.T) {
	tests := []struct {
		md   string
		n    int
		want string
	}{
		{"plain", 10, "plain"},
		{"**bold** `code` and _em_", 40, "bold code and em"},
		{"# Heading\n\n| a | b |\n|--|--|\n| 1 | 2 |", 40, "Heading a | b --|-- 1 | 2"},
		{"ends with a period.", 40, "ends with a period."},
		{"abcdefghij", 5, "abcd…"},
		{"漢字漢字漢字", 4, "漢字漢…"},
		{"  \n ", 5, ""},
	}
	for _, tt := range tests {
		if got := Line(tt.md, tt.n); got != tt.want {
			t.Errorf("Line(%q, %d) = %q, want %q", tt.md, tt.n, got, tt.want)
		}
	}
}

func TestLen(t *testing.T) {
	tests := []struct {
		s    string
		d    Dialect
		want int
	}{
		{"abc", DialectPlain, 3},
		{"😀a", DialectTelegram, 3},
		{"😀a", DialectDiscord, 2},
		{"漢字", DialectTelegram, 2},
	}
	for _, tt := range tests {
		if got := Len(tt.s, tt.d); got != tt.want {
			t.Errorf("Len(%q, %s) = %d, want %d", tt.s, tt.d, got, tt.want)
		}
	}
}

func TestSplitKeepsStructure(t *testing.T) {
	code := "```go\n" + strings.Repeat("fmt.Println(\"hello\")\n", 40) + "```"
	list := strings.Repeat("- an item with some words in it\n", 30)
	para := strings.Repeat("This is a sentence. ", 60)
	for _, d := range []Dialect{DialectTelegram, DialectSlack, DialectDiscord, DialectPlain, DialectANSI, DialectMarkdown} {
		for _, in := range []string{code, list, para, "# T\n\n" + para + "\n\n" + code + "\n\n" + list} {
			chunks := Split(in, d, 200)
			if len(chunks) < 2 {
				t.Fatalf("%s: %d chunks for %d bytes", d, len(chunks), len(in))
			}
			for i, c := range chunks {
				if n := Len(Render(c, d), d); n > 200 {
					t.Errorf("%s chunk %d: %d > 200", d, i, n)
				}
				if strings.HasPrefix(in, "```") && (!strings.HasPrefix(c, "```go\n") || !strings.HasSuffix(c, "\n```")) {
					t.Errorf("%s chunk %d not a closed go fence: %q", d, i, c)
				}
				if strings.HasPrefix(in, "- ") && !strings.HasPrefix(c, "- an item") {
					t.Errorf("%s chunk %d breaks an item: %q", d, i, c)
				}
				if strings.HasPrefix(in, "This") && !strings.HasSuffix(c, ".") {
					t.Errorf("%s chunk %d not cut at a sentence: %q", d, i, c)
				}
			}
		}
	}
}

func TestSplitSurrogates(t *testing.T) {
	in := strings.Repeat("😀", 100)
	chunks := Split(in, DialectTelegram, 17)
	if got := strings.Join(chunks, ""); got != in {
		t.Fatalf("emoji lost or broken: %q", got)
	}
	for _, c := range chunks {
		if n := Len(Render(c, DialectTelegram), DialectTelegram); n > 17 || n%2 != 0 {
			t.Errorf("chunk %q has %d units", c, n)
		}
	}
}

func TestSplitBlank(t *testing.T) {
	if got := Split(" \n\n ", DialectPlain, 100); got != nil {
		t.Fatalf("Split(blank) = %q, want nil", got)
	}
}

// agentAnswer builds a realistic ~20 KB agent reply.
func agentAnswer() string {
	var b strings.Builder
	for b.Len() < 20000 {
		b.WriteString("## Step\n\nI looked at `main.go` and found **two issues**: the handler ignores `ctx` and the retry loop never _backs off_. See [the docs](https://pkg.go.dev/context) for details.\n\n")
		b.WriteString("- fix the handler\n- add backoff\n  - exponential\n  - with jitter\n\n")
		b.WriteString("```go\nfunc retry(ctx context.Context) error {\n\tfor i := 0; i < 5; i++ {\n\t\tif err := call(ctx); err == nil {\n\t\t\treturn nil\n\t\t}\n\t}\n\treturn errTooMany\n}\n```\n\n")
		b.WriteString("| file | lines |\n|---|---:|\n| main.go | 120 |\n| retry.go | 48 |\n\n> Note: run `go test ./...` afterwards.\n\n")
	}
	return b.String()
}

func BenchmarkRenderSplit(b *testing.B) {
	md := agentAnswer()
	for _, d := range []Dialect{DialectTelegram, DialectSlack, DialectDiscord, DialectPlain, DialectANSI, DialectMarkdown} {
		b.Run("Render/"+string(d), func(b *testing.B) {
			for b.Loop() {
				Render(md, d)
			}
		})
		b.Run("Split/"+string(d), func(b *testing.B) {
			for b.Loop() {
				Split(md, d, 1900)
			}
		})
	}
}
