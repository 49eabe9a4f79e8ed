package stream

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Rendering limits for tool lines and verbose extras, in runes.
const (
	summaryTools   = 60
	summaryVerbose = 200
	errorLineLen   = 80
	excerptLen     = 500
	excerptLines   = 10
	thinkingLen    = 600
	runningStep    = 5 * time.Second // granularity of a running tool's clock
)

// cursor marks a reply that is still being written.
const cursor = "▌"

// item is one part of a reply: an assistant message section or a tool call.
type item struct {
	tool     *toolRun
	thinking string
	text     string
}

// toolRun is one tool call.
type toolRun struct {
	name, summary string
	start, end    time.Time
	done, isError bool
	excerpt       string
}

// document is the content of a reply, independent of any platform.
type document struct {
	items  []*item
	open   *item // the current assistant message section, nil if none
	tools  map[string]*toolRun
	status string
}

// section returns the current assistant message section, opening one.
func (d *document) section() *item {
	if d.open == nil {
		d.open = &item{}
		d.items = append(d.items, d.open)
	}
	return d.open
}

func (d *document) setText(md string) { d.section().text = md }

func (d *document) setThinking(s string) { d.section().thinking = s }

func (d *document) endMessage() { d.open = nil }

// setFinal replaces the text of the last assistant message: the open one,
// else the last part of the reply if it is a message; otherwise md becomes
// a new message after the tool lines.
func (d *document) setFinal(md string) {
	if d.open == nil && len(d.items) > 0 && d.items[len(d.items)-1].tool == nil {
		d.open = d.items[len(d.items)-1]
	}
	d.setText(md)
}

func (d *document) toolStart(id, name, summary string, now time.Time) {
	t := &toolRun{name: name, summary: summary, start: now}
	if d.tools == nil {
		d.tools = map[string]*toolRun{}
	}
	d.tools[id] = t
	d.items = append(d.items, &item{tool: t})
}

// toolEnd marks a tool finished; it reports false for an unknown id.
func (d *document) toolEnd(id string, isError bool, excerpt string, now time.Time) bool {
	t, ok := d.tools[id]
	if !ok || t.done {
		return false
	}
	t.done, t.isError, t.excerpt, t.end = true, isError, excerpt, now
	return true
}

// running returns a running tool, nil if none.
func (d *document) running() *toolRun {
	for _, it := range d.items {
		if it.tool != nil && !it.tool.done {
			return it.tool
		}
	}
	return nil
}

// render returns the reply as CommonMark. live adds the status line.
func (d *document) render(v Verbosity, now time.Time, live bool) string {
	var b strings.Builder
	part := func() *strings.Builder {
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		return &b
	}
	for _, it := range d.items {
		switch {
		case it.tool != nil:
			if v != Quiet {
				writeTool(part(), it.tool, v, now)
			}
		default:
			if th := strings.TrimSpace(it.thinking); v == Verbose && th != "" {
				writeThinking(part(), th)
			}
			if t := cleanText(it.text); t != "" {
				part().WriteString(t)
			}
		}
	}
	if s := strings.TrimSpace(d.status); live && s != "" {
		part().WriteString("_" + escapeInline(oneLine(s)) + "_")
	}
	return b.String()
}

// cleanText trims blank edges and closes a code fence left open, so that
// what follows is not swallowed by it.
func cleanText(s string) string {
	s = strings.TrimRight(strings.TrimLeft(s, "\r\n"), " \t\r\n")
	if s == "" {
		return ""
	}
	if f := openFence(s); f != "" {
		s += "\n" + f
	}
	return s
}

// openFence returns the fence that closes a code block still open at the
// end of md, "" if none.
func openFence(md string) string {
	var open string
	for line := range strings.Lines(md) {
		t := strings.TrimRight(line, "\r\n")
		ind := len(t) - len(strings.TrimLeft(t, " "))
		if ind > 3 {
			continue
		}
		t = t[ind:]
		if open != "" {
			if strings.HasPrefix(t, open) && strings.Trim(t, string(open[0])+" \t") == "" {
				open = ""
			}
			continue
		}
		for _, ch := range []byte{'`', '~'} {
			n := 0
			for n < len(t) && t[n] == ch {
				n++
			}
			if n >= 3 && !(ch == '`' && strings.Contains(t[n:], "`")) {
				open = t[:n]
			}
		}
	}
	return open
}

func writeTool(b *strings.Builder, t *toolRun, v Verbosity, now time.Time) {
	icon, dur := "⏳", ""
	switch {
	case t.done && t.isError:
		icon, dur = "✗", fmtDur(t.end.Sub(t.start))
	case t.done:
		icon, dur = "✓", fmtDur(t.end.Sub(t.start))
	default:
		if el := now.Sub(t.start).Truncate(runningStep); el > 0 {
			dur = fmtDur(el) + "…"
		}
	}
	limit := summaryTools
	if v == Verbose {
		limit = summaryVerbose
	}
	line := t.name
	if s := truncate(oneLine(t.summary), limit); s != "" {
		line += " · " + s
	}
	if dur != "" {
		line += " · " + dur
	}
	b.WriteString(icon + " " + inlineCode(line))
	ex := strings.TrimSpace(t.excerpt)
	switch {
	case ex == "" || !t.done:
	case v == Verbose:
		b.WriteString("\n")
		writeCodeBlock(b, excerpt(ex))
	case t.isError:
		first, _, _ := strings.Cut(ex, "\n")
		b.WriteString(" — " + escapeInline(truncate(first, errorLineLen)))
	}
}

func writeThinking(b *strings.Builder, s string) {
	s = truncate(s, thinkingLen)
	first := true
	for line := range strings.Lines(s) {
		if !first {
			b.WriteString("\n")
		}
		prefix := "> "
		if first {
			prefix = "> 💭 "
		}
		first = false
		b.WriteString(prefix + strings.TrimRight(line, "\r\n"))
	}
}

func writeCodeBlock(b *strings.Builder, s string) {
	fence := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	b.WriteString(fence + "\n" + s + "\n" + fence)
}

// excerpt keeps the head of a tool result.
func excerpt(s string) string {
	n := 0
	for i := range len(s) {
		if s[i] == '\n' {
			n++
			if n == excerptLines {
				s = s[:i] + "\n…"
				break
			}
		}
	}
	return truncate(s, excerptLen)
}

// inlineCode wraps s in a code span whose delimiter is longer than any
// backtick run inside.
func inlineCode(s string) string {
	d := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return d + s + d
}

func longestRun(s string, ch byte) int {
	best, n := 0, 0
	for i := range len(s) {
		if s[i] == ch {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// escapeInline backslash-escapes markdown punctuation.
func escapeInline(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_[]<>#|~!", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// truncate cuts s to at most n runes, ending with "…" when cut.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:n-1]), " \n") + "…"
}

// fmtDur formats a tool duration compactly: 0.4s, 12s, 2m05s, 1h02m.
func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Second && d%time.Second != 0:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	default:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
}

// withCursor appends the streaming cursor to a live chunk, on its own line
// after a fence line so the fence stays valid.
func withCursor(md string) string {
	if md == "" {
		return cursor
	}
	last := md[strings.LastIndexByte(md, '\n')+1:]
	t := strings.TrimLeft(last, " ")
	if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
		return md + "\n" + cursor
	}
	return md + " " + cursor
}
