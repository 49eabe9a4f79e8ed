package chat

import "strings"

// renderMarkdown returns normalised CommonMark: trimmed, with "\n" line
// ends and an unclosed code fence closed, so that a streaming buffer always
// displays as the finished text would.
func renderMarkdown(src string) string {
	s := strings.TrimRight(strings.TrimLeft(src, "\n"), " \t\n")
	if fence := openFence(s); fence != "" {
		s += "\n" + fence
	}
	return s
}

// openFence returns the fence that s leaves open at its end ("" if none).
// Container markers (">" and indentation) before a fence are ignored.
func openFence(s string) string {
	open := ""
	for line := range strings.Lines(s) {
		l := strings.TrimLeft(line, " \t>")
		l = strings.TrimRight(l, "\n")
		if open == "" {
			if f := fenceOf(l); f != "" {
				open = f
			}
			continue
		}
		if strings.HasPrefix(l, open) && strings.Trim(l, open[:1]+" \t") == "" {
			open = ""
		}
	}
	return open
}

// fenceOf returns the fence that opens a code block on line l, or "".
func fenceOf(l string) string {
	if len(l) < 3 || (l[0] != '`' && l[0] != '~') {
		return ""
	}
	c := l[0]
	n := 0
	for n < len(l) && l[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.IndexByte(l[n:], '`') >= 0) {
		return ""
	}
	return l[:n]
}
