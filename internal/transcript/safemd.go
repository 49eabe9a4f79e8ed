package transcript

import (
	"bytes"
	"html/template"
	"net/url"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// safeMarkdown renders CommonMark with GitHub's tables, strikethrough,
// task lists and bare links as HTML that runs nothing and loads nothing,
// whatever the text says: raw HTML (blocks and inline) is shown as text,
// a link keeps its href only for http, https and mailto URLs (any other
// shows its text alone), and an image is never loaded: it shows its alt
// text, linked to its URL under the same rule. goldmark's HTML renderer
// writes everything else; attributes in markdown (`{#id}`) are not
// parsed, so no event attribute can be written.
type safeMarkdown struct {
	md goldmark.Markdown
}

func newSafeMarkdown() *safeMarkdown {
	return &safeMarkdown{md: goldmark.New(
		goldmark.WithExtensions(
			extension.Linkify, extension.Strikethrough, extension.TaskList,
			// Column alignment as an align attribute: the page's content
			// security policy allows no style attributes.
			extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		),
		// Ahead of goldmark's own renderers (priority 1000).
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(safeNodes{}, 10))),
	)}
}

// render returns text as safe HTML.
func (m *safeMarkdown) render(text string) template.HTML {
	var b bytes.Buffer
	if err := m.md.Convert([]byte(text), &b); err != nil {
		// goldmark's renderer fails only when its writer does; a
		// buffer does not. Show the text as text, to be sure.
		return template.HTML("<pre>" + template.HTMLEscapeString(text) + "</pre>")
	}
	// The output is safe by construction (see safeNodes): raw HTML is
	// escaped, URLs filtered, the rest written by goldmark with escaping.
	return template.HTML(b.String())
}

// safeNodes renders the nodes through which markdown could carry markup
// or a URL of its own.
type safeNodes struct{}

func (safeNodes) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindHTMLBlock, renderHTMLBlock)
	r.Register(ast.KindRawHTML, renderRawHTML)
	r.Register(ast.KindLink, renderLink)
	r.Register(ast.KindAutoLink, renderAutoLink)
	r.Register(ast.KindImage, renderImage)
}

// renderHTMLBlock shows an HTML block as the text it is.
func renderHTMLBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.HTMLBlock)
	_, _ = w.WriteString(`<p class="raw">`)
	lines := n.Lines()
	for i := range lines.Len() {
		seg := lines.At(i)
		_, _ = w.Write(util.EscapeHTML(seg.Value(source)))
	}
	if n.HasClosure() {
		_, _ = w.Write(util.EscapeHTML(n.ClosureLine.Value(source)))
	}
	_, _ = w.WriteString("</p>\n")
	return ast.WalkSkipChildren, nil
}

// renderRawHTML shows inline HTML as the text it is.
func renderRawHTML(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkSkipChildren, nil
	}
	n := node.(*ast.RawHTML)
	for i := range n.Segments.Len() {
		seg := n.Segments.At(i)
		_, _ = w.Write(util.EscapeHTML(seg.Value(source)))
	}
	return ast.WalkSkipChildren, nil
}

// href returns the attribute value of a link to dest, or false when dest
// is not an absolute http, https or mailto URL.
func href(dest []byte) ([]byte, bool) {
	u, err := url.Parse(string(dest))
	if err != nil {
		return nil, false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "mailto":
		return util.EscapeHTML(util.URLEscape(dest, true)), true
	}
	return nil, false
}

const linkRel = `" rel="nofollow noopener noreferrer">`

// renderLink writes an allowed link; any other shows its text alone.
func renderLink(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Link)
	h, ok := href(n.Destination)
	if !ok {
		return ast.WalkContinue, nil
	}
	if entering {
		_, _ = w.WriteString(`<a href="`)
		_, _ = w.Write(h)
		_, _ = w.WriteString(linkRel)
	} else {
		_, _ = w.WriteString("</a>")
	}
	return ast.WalkContinue, nil
}

// renderAutoLink writes a bare or <…> link that is allowed; any other
// shows as text.
func renderAutoLink(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	n := node.(*ast.AutoLink)
	dest := n.URL(source)
	if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(dest), []byte("mailto:")) {
		dest = append([]byte("mailto:"), dest...)
	}
	label := util.EscapeHTML(n.Label(source))
	h, ok := href(dest)
	if !ok {
		_, _ = w.Write(label)
		return ast.WalkContinue, nil
	}
	_, _ = w.WriteString(`<a href="`)
	_, _ = w.Write(h)
	_, _ = w.WriteString(linkRel)
	_, _ = w.Write(label)
	_, _ = w.WriteString("</a>")
	return ast.WalkContinue, nil
}

// renderImage shows an image as "🖼 alt text", linked to its URL when it
// is allowed: a shared page fetches nothing (a remote image would tell
// its server who reads the page).
func renderImage(w util.BufWriter, _ []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	n := node.(*ast.Image)
	h, ok := href(n.Destination)
	switch {
	case entering && ok:
		_, _ = w.WriteString(`<a class="img" href="`)
		_, _ = w.Write(h)
		_, _ = w.WriteString(linkRel + "🖼 ")
	case entering:
		_, _ = w.WriteString(`<span class="img">🖼 `)
	case ok:
		_, _ = w.WriteString("</a>")
	default:
		_, _ = w.WriteString("</span>")
	}
	return ast.WalkContinue, nil
}
