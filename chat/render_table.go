package chat

import (
	"strings"
	"unicode"

	east "github.com/yuin/goldmark/extension/ast"
)

// table renders a GFM table as aligned monospace text; chat dialects have
// no tables, so it goes in a code block where the dialect has one.
func (r *renderer) table(n *east.Table) string {
	t := tableText(n, r.src)
	switch r.d {
	case DialectTelegram:
		return "<pre>" + escapeHTML(t) + "</pre>"
	case DialectSlack:
		return "```\n" + breakFences(escapeHTML(t)) + "\n```"
	case DialectDiscord:
		return "```\n" + breakFences(t) + "\n```"
	case DialectANSI:
		return stripControls(t)
	}
	return t
}

// tableText lays a table out as text: cells padded to column width, a
// rule under the header.
func tableText(n *east.Table, src []byte) string {
	plain := inlineRenderer{d: DialectPlain, src: src}
	var rows [][]string
	header := -1
	for row := n.FirstChild(); row != nil; row = row.NextSibling() {
		if _, ok := row.(*east.TableHeader); ok {
			header = len(rows)
		}
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			cells = append(cells, strings.ReplaceAll(plain.inline(c), "\n", " "))
		}
		rows = append(rows, cells)
	}
	var widths []int
	for _, row := range rows {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], textWidth(c))
		}
	}
	var b strings.Builder
	for ri, row := range rows {
		if ri > 0 {
			b.WriteByte('\n')
		}
		var line strings.Builder
		for i, c := range row {
			if i > 0 {
				line.WriteString(" | ")
			}
			pad := widths[i] - textWidth(c)
			align := east.AlignNone
			if i < len(n.Alignments) {
				align = n.Alignments[i]
			}
			switch align {
			case east.AlignRight:
				line.WriteString(strings.Repeat(" ", pad) + c)
			case east.AlignCenter:
				line.WriteString(strings.Repeat(" ", pad/2) + c + strings.Repeat(" ", pad-pad/2))
			default:
				line.WriteString(c + strings.Repeat(" ", pad))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		if ri == header {
			b.WriteByte('\n')
			for i, w := range widths {
				if i > 0 {
					b.WriteString("-|-")
				}
				b.WriteString(strings.Repeat("-", w))
			}
		}
	}
	return b.String()
}

// textWidth approximates the terminal width of s: wide East Asian
// characters and emoji count two, combining marks zero.
func textWidth(s string) int {
	w := 0
	for _, c := range s {
		switch {
		case unicode.Is(unicode.Mn, c) || c == 0x200d || c >= 0xfe00 && c <= 0xfe0f:
		case c >= 0x1100 && c <= 0x115f, c >= 0x2e80 && c <= 0xa4cf, c >= 0xac00 && c <= 0xd7a3,
			c >= 0xf900 && c <= 0xfaff, c >= 0xfe30 && c <= 0xfe4f, c >= 0xff00 && c <= 0xff60,
			c >= 0xffe0 && c <= 0xffe6, c >= 0x1f300 && c <= 0x1faff, c >= 0x20000 && c <= 0x3fffd:
			w += 2
		default:
			w++
		}
	}
	return w
}
