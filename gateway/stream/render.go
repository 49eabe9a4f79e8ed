package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pibot/pibot/chat"
)

// Rendering limits for tool lines and verbose extras, in runes.
const (
	summaryTools   = 60
	summaryVerbose = 200
	errorLineLen   = 80
	excerptLen     = 500
	excerptLines   = 10
	thinkingLen    = 600
	outputHead     = 8 << 10         // bytes of a tool's output looked at
	runningStep    = 5 * time.Second // granularity of a running tool's clock
)

// cursor marks a reply that is still being written.
const cursor = "▌"

// parts writes the parts of a reply separated by blank lines.
type parts struct{ b strings.Builder }

// next starts a part.
func (p *parts) next() *strings.Builder {
	if p.b.Len() > 0 {
		p.b.WriteString("\n\n")
	}
	return &p.b
}

// render returns the reply as CommonMark. live adds the status line.
func (d *document) render(v Verbosity, now time.Time, live bool) string {
	if t, ok := d.plainText(v, live); ok {
		return t
	}
	var p parts
	for _, it := range d.items {
		if it.tool != nil {
			if v != Quiet {
				writeTool(p.next(), it.tool, v, now)
			}
			continue
		}
		writeSection(&p, it, v, it.text)
	}
	if s := strings.TrimSpace(d.status); live && s != "" {
		p.next().WriteString("_" + escapeInline(oneLine(s)) + "_")
	}
	return p.b.String()
}

// plainText returns the rendering of a reply that is one message of text
// (no tool line, no thinking shown, no status line): the text itself,
// trimmed, not copied. Most replies are, and the stream renders them at
// every edit, and before the first post at every token.
func (d *document) plainText(v Verbosity, live bool) (string, bool) {
	if len(d.items) != 1 || d.items[0].tool != nil ||
		v == Verbose && strings.TrimSpace(d.items[0].thinking) != "" ||
		live && strings.TrimSpace(d.status) != "" {
		return "", false
	}
	return cleanText(d.items[0].text), true
}

// renderFinished returns the part of the reply that will not change any
// more: everything before the first running tool or the open message,
// plus the open message's settled head (settled: up to its last word
// boundary, without what could still change its rendering). Each result extends the one
// before, and render's final result extends them all, unless the final
// text replaces a message.
func (d *document) renderFinished(v Verbosity) string {
	var p parts
	for _, it := range d.items {
		switch {
		case it.tool != nil && !it.tool.done:
			return p.b.String()
		case it.tool != nil:
			if v != Quiet {
				writeTool(p.next(), it.tool, v, it.tool.end)
			}
		case it == d.open:
			if it.text != "" {
				writeSection(&p, it, v, it.text[:settled(it.text)])
			}
			return p.b.String()
		default:
			writeSection(&p, it, v, it.text)
		}
	}
	return p.b.String()
}

// writeSection writes an assistant message section showing text.
func writeSection(p *parts, it *item, v Verbosity, text string) {
	if th := strings.TrimSpace(it.thinking); v == Verbose && th != "" {
		writeThinking(p.next(), th)
	}
	if t := cleanText(text); t != "" {
		p.next().WriteString(t)
	}
}

// toolSummary is the argument shown on a tool's line: its command, path,
// pattern or name, on one line and cut to the verbosity's length; in
// Verbose, the arguments as compact JSON when none of those is set.
func toolSummary(args json.RawMessage, v Verbosity) string {
	limit := summaryTools
	if v == Verbose {
		limit = summaryVerbose
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, k := range [...]string{"command", "path", "pattern", "name"} {
		if s, ok := m[k].(string); ok {
			return truncate(oneLine(s), limit)
		}
	}
	var b bytes.Buffer
	if v != Verbose || len(m) == 0 || json.Compact(&b, args) != nil {
		return ""
	}
	return truncate(oneLine(b.String()), limit)
}

// toolDetail is what follows a finished tool's line: in Verbose, the first
// lines of its output in a code block; in Tools, the head of a failed
// tool's output on the same line.
func toolDetail(output string, isError bool, v Verbosity) string {
	out := strings.TrimSpace(head(output, outputHead))
	switch {
	case out == "":
		return ""
	case v == Verbose:
		var b strings.Builder
		b.WriteString("\n")
		writeCodeBlock(&b, excerpt(out))
		return b.String()
	case isError:
		return " — " + escapeInline(truncate(oneLine(out), errorLineLen))
	default:
		return ""
	}
}

// writeTool writes a tool call's line: "✓ `bash · go test ./... · 12s`",
// then its detail.
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
	line := t.name
	if t.summary != "" {
		line += " · " + t.summary
	}
	if dur != "" {
		line += " · " + dur
	}
	b.WriteString(icon + " " + inlineCode(line))
	if t.done {
		b.WriteString(t.detail)
	}
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
	var f fence
	for line := range strings.Lines(md) {
		f.feed(strings.TrimRight(line, "\r\n"))
	}
	return f.open
}

// fence follows code fences line by line.
type fence struct {
	open string // the fence of the code block the last line is in, "" if none
}

// feed takes the next line, without its line ending.
func (f *fence) feed(t string) {
	ind := len(t) - len(strings.TrimLeft(t, " "))
	if ind > 3 {
		return
	}
	t = t[ind:]
	if f.open != "" {
		if strings.HasPrefix(t, f.open) && strings.Trim(t, string(f.open[0])+" \t") == "" {
			f.open = ""
		}
		return
	}
	for _, ch := range []byte{'`', '~'} {
		n := 0
		for n < len(t) && t[n] == ch {
			n++
		}
		if n >= 3 && !(ch == '`' && strings.Contains(t[n:], "`")) {
			f.open = t[:n]
		}
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
	fence := strings.Repeat("`", max(3, chat.LongestRun(s, '`')+1))
	b.WriteString(fence + "\n" + s + "\n" + fence)
}

// excerpt keeps the head of a tool result: at most excerptLines lines and
// excerptLen runes.
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

// head returns at most the first n bytes of s, cut at a rune boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// inlineCode wraps s in a code span whose delimiter is longer than any
// backtick run inside.
func inlineCode(s string) string {
	d := strings.Repeat("`", chat.LongestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return d + s + d
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
