package chat

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// seeds is the shared inline corpus of the markdown fuzz targets.
var seeds = []string{
	"",
	"# H1\n## H2\n#### H4 **b**\n",
	"**bold** _it_ ~~s~~ `code` [l](https://x.y) <https://a.b> www.c.d",
	"- a\n- b\n  - c\n    1. d\n- [ ] e\n- [x] f\n",
	"```go\nfunc f() { a < b && c > d }\n```\n",
	"```\nunterminated <b>",
	"> q\n> > qq\n>\n> - l\n",
	"| a | b |\n|:-|-:|\n| 1 | 2 |\n| 日本語 | 😀 |\n",
	"<b>raw</b> & &amp; &#x1F600; \\*esc\\*",
	"emoji 😀👍🏽 CJK 漢字かな 한국어",
	"![img](https://x/y.png \"t\")\n\n---\n\n***x***",
	"[ref]\n\n[ref]: https://r.example \"T\"\n",
	"a  \nb\\\nc\n\n    indented\n",
	"\xff\xfe bad utf8 \x00 nul \x1b[31m esc",
	"*a **b** c*\n__under__ ~one~",
	"1. x\n\n   para\n\n   ```sh\n   ls\n   ```\n2. y\n",
	"<div>\nhtml block\n</div>\n",
	"`` a ` b ``  and ```` ``` ````",
}

func fuzzRender(f *testing.F, d Dialect) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := Render(md, d)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 in %q", out)
		}
		if d == DialectTelegram {
			if err := checkTelegramHTML(out); err != nil {
				t.Fatalf("%v\ninput %q\noutput %q", err, md, out)
			}
		}
		if d == DialectANSI && strings.Contains(stripANSI(out), "\x1b") {
			t.Fatalf("stray escape in %q", out)
		}
	})
}

func FuzzRenderTelegram(f *testing.F) { fuzzRender(f, DialectTelegram) }
func FuzzRenderSlack(f *testing.F)    { fuzzRender(f, DialectSlack) }
func FuzzRenderDiscord(f *testing.F)  { fuzzRender(f, DialectDiscord) }
func FuzzRenderPlain(f *testing.F)    { fuzzRender(f, DialectPlain) }
func FuzzRenderANSI(f *testing.F)     { fuzzRender(f, DialectANSI) }
func FuzzRenderMarkdown(f *testing.F) { fuzzRender(f, DialectMarkdown) }

// telegramTags are the tags Telegram's HTML parse mode accepts.
var telegramTags = map[string]bool{"b": true, "i": true, "s": true, "u": true, "code": true, "pre": true, "a": true, "blockquote": true}

// checkTelegramHTML parses s strictly: only Telegram's tags, balanced,
// only &amp; &lt; &gt; &quot; entities, no nested blockquote or markup
// inside pre.
func checkTelegramHTML(s string) error {
	dec := xml.NewDecoder(strings.NewReader("<root>" + s + "</root>"))
	dec.Strict = true
	dec.Entity = map[string]string{}
	var stack []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			name := tok.Name.Local
			if name == "root" {
				continue
			}
			if !telegramTags[name] {
				return errors.New("tag not allowed: " + name)
			}
			for _, open := range stack {
				if open == name || open == "code" || open == "pre" && name != "code" {
					return errors.New("bad nesting: " + name + " in " + open)
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			if tok.Name.Local != "root" {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if i := strings.IndexByte(s, '&'); i >= 0 {
		for _, part := range strings.Split(s, "&")[1:] {
			if !strings.HasPrefix(part, "amp;") && !strings.HasPrefix(part, "lt;") &&
				!strings.HasPrefix(part, "gt;") && !strings.HasPrefix(part, "quot;") {
				return errors.New("bad entity near &" + part[:min(len(part), 8)])
			}
		}
	}
	return nil
}

// stripANSI removes the SGR sequences the ANSI renderer emits.
func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == ';') {
				j++
			}
			if j < len(s) && s[j] == 'm' {
				i = j
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func FuzzSplit(f *testing.F) {
	for i, s := range seeds {
		f.Add(s, uint16(64+i*7), uint8(i))
	}
	f.Add(strings.Repeat("word ", 300), uint16(64), uint8(2))
	f.Add("```py\n"+strings.Repeat("print('x')\n", 60)+"```", uint16(80), uint8(0))
	f.Add(strings.Repeat("😀", 200), uint16(65), uint8(0))
	dialects := []Dialect{DialectTelegram, DialectSlack, DialectDiscord, DialectPlain, DialectANSI, DialectMarkdown}
	f.Fuzz(func(t *testing.T, md string, limit uint16, di uint8) {
		if len(md) > 4000 {
			return
		}
		d := dialects[int(di)%len(dialects)]
		lim := int(limit) % 600
		chunks := Split(md, d, lim)
		var joined strings.Builder
		for i, c := range chunks {
			if !utf8.ValidString(c) {
				t.Fatalf("chunk %d invalid UTF-8: %q", i, c)
			}
			if lim >= 64 {
				if n := Len(Render(c, d), d); n > lim {
					t.Fatalf("chunk %d renders to %d > %d in %s: %q", i, n, lim, d, c)
				}
			}
			joined.WriteString(Render(c, DialectPlain))
			joined.WriteByte('\n')
		}
		if lim >= minLimit {
			got, want := squash(joined.String()), squash(Render(md, DialectPlain))
			if got != want {
				t.Fatalf("text changed in %s at %d\ninput %q\nchunks %q\ngot  %q\nwant %q", d, lim, md, chunks, got, want)
			}
		}
	})
}

// squash drops whitespace, list bullets and the zero-width spaces that
// break fences, so that split and unsplit plain text compare.
func squash(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '•', '◦', '\u200b':
			return -1
		}
		return r
	}, s)
}
