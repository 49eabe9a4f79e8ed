package chat

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/util"
)

// ANSI SGR sequences.
const (
	ansiBold        = "\x1b[1m"
	ansiBoldOff     = "\x1b[22m"
	ansiDim         = "\x1b[2m"
	ansiDimOff      = "\x1b[22m"
	ansiItalic      = "\x1b[3m"
	ansiItalicOff   = "\x1b[23m"
	ansiUnderline   = "\x1b[4m"
	ansiUnderOff    = "\x1b[24m"
	ansiStrike      = "\x1b[9m"
	ansiStrikeOff   = "\x1b[29m"
	ansiCodeOpen    = ansiDim
	ansiCodeOffBase = ansiDimOff
)

// inlineRenderer renders the inline content of a goldmark AST of src in
// one dialect: text, code spans, styles and links.
type inlineRenderer struct {
	d   Dialect
	src []byte
	// noBold suppresses bold markers inside headings rendered as bold.
	noBold bool
	// bold counts open ANSI bold spans, to restore bold after dim code.
	bold int
	// styles counts open bold, italic and strikethrough spans; a style
	// is not reopened inside itself.
	styles [3]int
}

// inline renders the inline children of block n.
func (r *inlineRenderer) inline(n ast.Node) string {
	var b strings.Builder
	r.inlines(&b, n)
	return strings.TrimRight(b.String(), " \t\n")
}

// heading renders the inline children of heading n, which the dialect
// shows bold (or as a heading): bold markers inside are dropped.
func (r *inlineRenderer) heading(n *ast.Heading) string {
	r.noBold = true
	r.bold++
	body := r.inline(n)
	r.bold--
	r.noBold = false
	return body
}

// inlines renders n's inline children into b.
func (r *inlineRenderer) inlines(b *strings.Builder, n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inl(b, c)
	}
}

// inl renders one inline node into b.
func (r *inlineRenderer) inl(b *strings.Builder, n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		v := n.Segment.Value(r.src)
		if !n.IsRaw() {
			v = unescape(v)
		}
		b.WriteString(r.text(string(v)))
		if n.HardLineBreak() || n.SoftLineBreak() {
			b.WriteByte('\n')
		}
	case *ast.String:
		v := n.Value
		if !n.IsRaw() && !n.IsCode() {
			v = unescape(v)
		}
		b.WriteString(r.text(string(v)))
	case *ast.CodeSpan:
		r.codeSpan(b, n)
	case *ast.Emphasis:
		if n.Level >= 2 {
			r.wrap(b, n, "<b>", "</b>", "*", "**")
		} else {
			r.wrap(b, n, "<i>", "</i>", "_", "*")
		}
	case *east.Strikethrough:
		r.wrap(b, n, "<s>", "</s>", "~", "~~")
	case *ast.Link:
		var inner strings.Builder
		r.inlines(&inner, n)
		r.link(b, string(n.Destination), inner.String(), false)
	case *ast.Image:
		alt := (&inlineRenderer{d: DialectPlain, src: r.src}).inline(n)
		if alt == "" {
			alt = "image"
		}
		r.link(b, string(n.Destination), r.text(alt), false)
	case *ast.AutoLink:
		url, label := string(n.URL(r.src)), string(n.Label(r.src))
		r.link(b, url, r.text(label), true)
	case *ast.RawHTML:
		var raw strings.Builder
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			raw.Write(seg.Value(r.src))
		}
		if isBreakTag(raw.String()) {
			b.WriteByte('\n')
			return
		}
		b.WriteString(r.text(raw.String()))
	case *east.TaskCheckBox:
		if n.IsChecked {
			b.WriteString("☑ ")
		} else {
			b.WriteString("☐ ")
		}
	default:
		r.inlines(b, n)
	}
}

// wrap renders n's children inside the dialect's markers for a style:
// tg* for Telegram, sl* for Slack, md for Discord (doubled for strong).
func (r *inlineRenderer) wrap(b *strings.Builder, n ast.Node, tgOpen, tgClose, slack, discord string) {
	bold := tgOpen == "<b>"
	var open, closing string
	switch r.d {
	case DialectTelegram:
		open, closing = tgOpen, tgClose
	case DialectSlack:
		open, closing = slack, slack
	case DialectDiscord:
		open, closing = discord, discord
	case DialectANSI:
		switch tgOpen {
		case "<b>":
			open, closing = ansiBold, ansiBoldOff
		case "<i>":
			open, closing = ansiItalic, ansiItalicOff
		default:
			open, closing = ansiStrike, ansiStrikeOff
		}
	}
	style := 2
	switch tgOpen {
	case "<b>":
		style = 0
	case "<i>":
		style = 1
	}
	if bold && r.noBold || r.styles[style] > 0 {
		open, closing = "", ""
	}
	r.styles[style]++
	defer func() { r.styles[style]-- }()
	var inner strings.Builder
	if bold && r.d == DialectANSI {
		r.bold++
	}
	r.inlines(&inner, n)
	if bold && r.d == DialectANSI {
		r.bold--
	}
	s := inner.String()
	if strings.TrimSpace(s) == "" || open == "" {
		b.WriteString(s)
		return
	}
	if r.d == DialectSlack || r.d == DialectDiscord {
		// Markers must hug the text: move outer whitespace outside them.
		core := strings.TrimSpace(s)
		lead := s[:strings.Index(s, core)]
		trail := s[len(lead)+len(core):]
		b.WriteString(lead + open + core + closing + trail)
		return
	}
	b.WriteString(open + s + closing)
	if closing == ansiBoldOff && r.bold > 0 {
		b.WriteString(ansiBold)
	}
}

// codeSpan renders inline code.
func (r *inlineRenderer) codeSpan(b *strings.Builder, n *ast.CodeSpan) {
	var code strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			v := t.Segment.Value(r.src)
			if bytes.HasSuffix(v, []byte("\n")) {
				code.Write(v[:len(v)-1])
				code.WriteByte(' ')
			} else {
				code.Write(v)
			}
		} else if s, ok := c.(*ast.String); ok {
			code.Write(s.Value)
		}
	}
	s := code.String()
	switch r.d {
	case DialectTelegram:
		b.WriteString("<code>" + escapeHTML(s) + "</code>")
	case DialectSlack:
		b.WriteString("`" + escapeHTML(s) + "`")
	case DialectDiscord:
		ticks := strings.Repeat("`", LongestRun(s, '`')+1)
		if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
			s = " " + s + " "
		}
		b.WriteString(ticks + s + ticks)
	case DialectANSI:
		b.WriteString(ansiCodeOpen + stripControls(s) + ansiCodeOffBase)
		if r.bold > 0 {
			b.WriteString(ansiBold)
		}
	default:
		b.WriteString(s)
	}
}

// link renders a link with destination url and rendered label.
func (r *inlineRenderer) link(b *strings.Builder, url, label string, auto bool) {
	if url == "" {
		b.WriteString(label)
		return
	}
	same := label == "" || label == url || auto
	switch r.d {
	case DialectTelegram:
		if !webURL(url) {
			break
		}
		if label == "" {
			label = escapeHTML(url)
		}
		b.WriteString(`<a href="` + escapeAttr(url) + `">` + label + "</a>")
		return
	case DialectSlack:
		if !webURL(url) {
			break
		}
		u := strings.NewReplacer("|", "%7C", ">", "%3E", "<", "%3C", " ", "%20").Replace(url)
		if same && !auto || label == "" || auto && label == url {
			b.WriteString("<" + u + ">")
			return
		}
		b.WriteString("<" + u + "|" + strings.ReplaceAll(label, "|", "¦") + ">")
		return
	case DialectDiscord:
		if same {
			b.WriteString(r.bareURL(url, label, auto))
			return
		}
		if strings.ContainsAny(url, " ()<>") {
			url = "<" + strings.NewReplacer(" ", "%20", "<", "%3C", ">", "%3E").Replace(url) + ">"
		}
		b.WriteString("[" + label + "](" + url + ")")
		return
	case DialectANSI:
		if same {
			b.WriteString(ansiUnderline + r.bareURL(url, label, auto) + ansiUnderOff)
			return
		}
		b.WriteString(ansiUnderline + label + ansiUnderOff + " (" + stripControls(url) + ")")
		return
	}
	if same {
		b.WriteString(r.bareURL(url, label, auto))
		return
	}
	b.WriteString(label + " (" + r.text(url) + ")")
}

// bareURL renders a link whose label is its URL.
func (r *inlineRenderer) bareURL(url, label string, auto bool) string {
	if auto && label != "" {
		return label
	}
	return r.text(url)
}

// webURL reports whether url is absolute with a scheme chat clients link.
func webURL(url string) bool {
	u := strings.ToLower(url)
	for _, p := range []string{"http://", "https://", "mailto:", "tg://", "ftp://"} {
		if strings.HasPrefix(u, p) {
			return len(u) > len(p)
		}
	}
	return false
}

// text escapes literal text for the dialect.
func (r *inlineRenderer) text(s string) string {
	switch r.d {
	case DialectTelegram, DialectSlack:
		return escapeHTML(s)
	case DialectDiscord:
		return escapeDiscord(s)
	case DialectANSI:
		return stripControls(s)
	}
	return s
}

// isBreakTag reports whether raw is a <br> tag.
func isBreakTag(raw string) bool {
	switch strings.ToLower(strings.ReplaceAll(raw, " ", "")) {
	case "<br>", "<br/>":
		return true
	}
	return false
}

// unescape resolves backslash escapes and character references.
func unescape(v []byte) []byte {
	if bytes.IndexByte(v, '\\') >= 0 {
		v = util.UnescapePunctuations(v)
	}
	if bytes.IndexByte(v, '&') >= 0 {
		v = util.ResolveNumericReferences(v)
		v = util.ResolveEntityNames(v)
		v = []byte(stripControls(string(v)))
	}
	return v
}

// escapeHTML escapes &, < and >.
func escapeHTML(s string) string {
	if !strings.ContainsAny(s, "&<>") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// escapeAttr escapes an HTML attribute value.
func escapeAttr(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// escapeDiscord backslash-escapes Discord markdown characters.
func escapeDiscord(s string) string {
	if !strings.ContainsAny(s, "\\*_~`|") {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune("\\*_~`|", c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// stripControls removes terminal control characters except \n and \t.
func stripControls(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(c rune) rune {
		if isControl(c) {
			return -1
		}
		return c
	}, s)
}

func isControl(c rune) bool {
	return c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 && c < 0xa0
}

// LongestRun returns the length of the longest run of c in s: a markdown
// code span or fence around s needs a backtick run one longer.
func LongestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}
