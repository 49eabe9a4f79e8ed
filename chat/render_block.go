package chat

import (
	"strconv"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// renderer renders the blocks of a goldmark AST of src in one dialect;
// its inline renderer renders the text inside them. Blocks render to
// strings without a trailing newline; siblings are joined by blank lines
// (or single newlines in tight lists), so a document's rendering is the
// join of its top-level blocks' renderings, which Split relies on.
type renderer struct {
	d   Dialect
	src []byte
	in  inlineRenderer
	// quote is the blockquote depth (Telegram cannot nest blockquotes).
	quote int
	// list is the list nesting depth.
	list int
}

// newRenderer returns a renderer of src in dialect d.
func newRenderer(d Dialect, src []byte) renderer {
	return renderer{d: d, src: src, in: inlineRenderer{d: d, src: src}}
}

// document renders the top-level blocks of doc.
func (r *renderer) document(doc ast.Node) string {
	return r.children(doc, "\n\n")
}

// children renders n's child blocks joined by sep, skipping empty ones.
func (r *renderer) children(n ast.Node, sep string) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		s := r.block(c)
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(s)
	}
	return b.String()
}

// block renders one block node.
func (r *renderer) block(n ast.Node) string {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return r.in.inline(n)
	case *ast.Heading:
		return r.heading(n)
	case *ast.ThematicBreak:
		if r.d == DialectANSI {
			return ansiDim + "────────" + ansiDimOff
		}
		return "───"
	case *ast.FencedCodeBlock:
		return r.code(string(n.Language(r.src)), blockLines(n, r.src))
	case *ast.CodeBlock:
		return r.code("", blockLines(n, r.src))
	case *ast.Blockquote:
		return r.blockquote(n)
	case *ast.List:
		return r.listBlock(n)
	case *ast.HTMLBlock:
		raw := blockLines(n, r.src)
		if n.HasClosure() {
			cl := n.ClosureLine
			raw += string(cl.Value(r.src))
		}
		return r.in.text(strings.TrimRight(raw, " \t\n"))
	case *ast.LinkReferenceDefinition:
		return ""
	case *east.Table:
		return r.table(n)
	}
	if n.Type() == ast.TypeBlock && n.FirstChild() != nil && n.FirstChild().Type() == ast.TypeInline {
		return r.in.inline(n)
	}
	return r.children(n, "\n\n")
}

// blockLines returns the raw text of block n's lines in src.
func blockLines(n ast.Node, src []byte) string {
	ls := n.Lines()
	var b strings.Builder
	for i := range ls.Len() {
		seg := ls.At(i)
		b.Write(seg.Value(src))
	}
	return b.String()
}

// heading renders a heading; chat dialects have none, so most use bold.
func (r *renderer) heading(n *ast.Heading) string {
	body := r.in.heading(n)
	if body == "" {
		return ""
	}
	switch r.d {
	case DialectTelegram:
		return "<b>" + body + "</b>"
	case DialectSlack:
		return "*" + body + "*"
	case DialectDiscord:
		if n.Level <= 3 {
			return strings.Repeat("#", n.Level) + " " + strings.ReplaceAll(body, "\n", " ")
		}
		return "**" + body + "**"
	case DialectANSI:
		return ansiBold + body + ansiBoldOff
	}
	return body
}

// code renders a code block's text with an optional language.
func (r *renderer) code(lang, code string) string {
	code = strings.TrimRight(code, "\n")
	if strings.TrimSpace(code) == "" {
		return ""
	}
	switch r.d {
	case DialectTelegram:
		if lang = cleanLang(lang); lang != "" {
			return `<pre><code class="language-` + lang + `">` + escapeHTML(code) + "</code></pre>"
		}
		return "<pre>" + escapeHTML(code) + "</pre>"
	case DialectSlack:
		return "```\n" + breakFences(escapeHTML(code)) + "\n```"
	case DialectDiscord:
		return "```" + cleanLang(lang) + "\n" + breakFences(code) + "\n```"
	case DialectANSI:
		return prefixLines(stripControls(code), "    ", "    ")
	}
	return code
}

// cleanLang keeps a code language only if it is a plain identifier.
func cleanLang(lang string) string {
	for _, c := range lang {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("+#-_.", c)) {
			return ""
		}
	}
	return lang
}

// breakFences keeps code from closing its ``` block early.
func breakFences(code string) string {
	if !strings.Contains(code, "```") {
		return code
	}
	return strings.ReplaceAll(code, "```", "`\u200b`\u200b`")
}

// blockquote renders a quote.
func (r *renderer) blockquote(n *ast.Blockquote) string {
	r.quote++
	inner := r.children(n, "\n\n")
	r.quote--
	if inner == "" {
		return ""
	}
	switch r.d {
	case DialectTelegram:
		if r.quote == 0 {
			return "<blockquote>" + inner + "</blockquote>"
		}
		return prefixLines(inner, "&gt; ", "&gt; ")
	case DialectANSI:
		p := ansiDim + "│" + ansiDimOff + " "
		return prefixLines(inner, p, p)
	}
	return prefixLines(inner, "> ", "> ")
}

// listBlock renders a list as marker lines, nested lists indented.
func (r *renderer) listBlock(n *ast.List) string {
	sep := "\n"
	if !n.IsTight {
		sep = "\n\n"
	}
	bullet := "• "
	if r.list > 0 {
		bullet = "◦ "
	}
	if r.d == DialectDiscord {
		bullet = "- "
	}
	r.list++
	defer func() { r.list-- }()
	var b strings.Builder
	num := n.Start
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		marker := bullet
		if n.IsOrdered() {
			marker = strconv.Itoa(num) + ". "
			num++
		}
		body := r.children(item, sep)
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		if body == "" {
			b.WriteString(strings.TrimSpace(marker))
			continue
		}
		b.WriteString(prefixLines(body, marker, strings.Repeat(" ", len([]rune(marker)))))
	}
	return b.String()
}

// prefixLines prefixes the first line of s with first and the others with
// rest (empty lines get rest without trailing spaces).
func prefixLines(s, first, rest string) string {
	var b strings.Builder
	b.Grow(len(s) + len(first) + strings.Count(s, "\n")*len(rest))
	b.WriteString(first)
	trimmed := strings.TrimRight(rest, " ")
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			b.WriteString(s[i:])
			break
		}
		b.WriteString(s[i : i+j+1])
		i += j + 1
		switch {
		case i == len(s):
		case s[i] == '\n':
			b.WriteString(trimmed)
		default:
			b.WriteString(rest)
		}
	}
	return b.String()
}
