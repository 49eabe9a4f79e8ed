package chat

import (
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// Dialect is a rendering target for markdown.
type Dialect string

// Dialects.
const (
	DialectPlain    Dialect = "plain"    // text without markup
	DialectMarkdown Dialect = "markdown" // CommonMark as is (web chat)
	DialectSlack    Dialect = "slack"    // Slack mrkdwn
	DialectTelegram Dialect = "telegram" // Telegram HTML
	DialectDiscord  Dialect = "discord"  // Discord markdown
	DialectANSI     Dialect = "ansi"     // terminal with ANSI styles
)

// Render renders CommonMark md (with GFM tables, strikethrough, autolinks
// and task lists) in dialect d. The output is valid UTF-8; Telegram output
// is well-formed HTML with balanced tags. An unclosed code fence, as seen
// while a reply is still streaming, renders as a code block to the end.
// An unknown dialect renders as DialectPlain.
func Render(md string, d Dialect) string {
	return renderWith(newParser(), md, d)
}

// renderWith is Render with a given parser, reused across calls by Split.
func renderWith(p parser.Parser, md string, d Dialect) string {
	if d == DialectMarkdown {
		// No parse: the text is its own rendering, and a clean one is
		// not copied (Split measures every live edit of a reply this way).
		return renderMarkdown(normalizeString(md))
	}
	src := normalize(md)
	r := newRenderer(d, src)
	return r.document(p.Parse(text.NewReader(src)))
}

// Line renders md as plain text on one line: its runs of white space,
// line breaks included, become one space, and a text longer than n runes
// is cut to n-1 and ends with "…". It is how a message is named in a
// list (the session tree, a button).
func Line(md string, n int) string {
	s := strings.Join(strings.Fields(Render(md, DialectPlain)), " ")
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		return string(r[:max(n-1, 0)]) + "…"
	}
	return s
}

// Len measures rendered text in d's units: UTF-16 code units for
// Telegram, characters (runes) otherwise.
func Len(s string, d Dialect) int {
	if d == DialectTelegram {
		n := 0
		for _, r := range s {
			if r >= 0x10000 {
				n += 2
			} else {
				n++
			}
		}
		return n
	}
	return utf8.RuneCountInString(s)
}

// newParser returns a goldmark parser with the GFM extension.
func newParser() parser.Parser {
	return goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()
}

// normalize makes md valid UTF-8 with "\n" line ends and without
// control characters other than tab and newline.
func normalize(md string) []byte { return []byte(normalizeString(md)) }

// normalizeString is normalize returning a string: md itself, not a copy,
// when it is clean already.
func normalizeString(md string) string {
	if !utf8.ValidString(md) {
		md = strings.ToValidUTF8(md, "\uFFFD")
	}
	if strings.IndexByte(md, '\r') >= 0 {
		md = strings.ReplaceAll(md, "\r\n", "\n")
		md = strings.ReplaceAll(md, "\r", "\n")
	}
	// Control characters have no place in chat text; some (ESC) would
	// inject terminal sequences, and Telegram's HTML parser rejects them.
	return stripControls(md)
}
