package tools

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Output limits shared by the tools, as in pi.
const (
	// DefaultMaxLines is the line limit of tool output.
	DefaultMaxLines = 2000
	// DefaultMaxBytes is the byte limit of tool output (50 KB).
	DefaultMaxBytes = 50 * 1024
	// GrepMaxLineLength caps one grep output line, in UTF-16 units.
	GrepMaxLineLength = 500
	// noLineLimit is JavaScript's Number.MAX_SAFE_INTEGER, which pi uses as
	// "no line limit" for grep, find and ls.
	noLineLimit = 9007199254740991
)

// Truncation describes how an output was cut, with pi's field names and key
// order (TruncationResult in pi's truncate.ts).
type Truncation struct {
	Content               string  `json:"content"`
	Truncated             bool    `json:"truncated"`
	TruncatedBy           *string `json:"truncatedBy"`
	TotalLines            int     `json:"totalLines"`
	TotalBytes            int     `json:"totalBytes"`
	OutputLines           int     `json:"outputLines"`
	OutputBytes           int     `json:"outputBytes"`
	LastLinePartial       bool    `json:"lastLinePartial"`
	FirstLineExceedsLimit bool    `json:"firstLineExceedsLimit"`
	MaxLines              int     `json:"maxLines"`
	MaxBytes              int     `json:"maxBytes"`
}

func by(s string) *string { return &s }

// formatSize renders a byte count like pi's formatSize.
func formatSize(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + "B"
	case n < 1024*1024:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + "KB"
	default:
		return strconv.FormatFloat(float64(n)/(1024*1024), 'f', 1, 64) + "MB"
	}
}

// truncateHead keeps the first lines of content that fit both limits,
// never a partial line.
func truncateHead(content string, maxLines, maxBytes int) Truncation {
	lines := strings.Split(content, "\n")
	t := Truncation{TotalLines: len(lines), TotalBytes: len(content), MaxLines: maxLines, MaxBytes: maxBytes}
	if len(lines) <= maxLines && len(content) <= maxBytes {
		t.Content, t.OutputLines, t.OutputBytes = content, len(lines), len(content)
		return t
	}
	t.Truncated = true
	if len(lines[0]) > maxBytes {
		t.TruncatedBy = by("bytes")
		t.FirstLineExceedsLimit = true
		return t
	}
	reason := "lines"
	n, size := 0, 0
	for i := 0; i < len(lines) && i < maxLines; i++ {
		b := len(lines[i])
		if i > 0 {
			b++
		}
		if size+b > maxBytes {
			reason = "bytes"
			break
		}
		n++
		size += b
	}
	if n >= maxLines && size <= maxBytes {
		reason = "lines"
	}
	t.Content = strings.Join(lines[:n], "\n")
	t.TruncatedBy = by(reason)
	t.OutputLines, t.OutputBytes = n, len(t.Content)
	return t
}

// truncateTail keeps the last lines of content that fit both limits; a
// single last line longer than maxBytes is cut to its tail.
func truncateTail(content string, maxLines, maxBytes int) Truncation {
	lines := strings.Split(content, "\n")
	t := Truncation{TotalLines: len(lines), TotalBytes: len(content), MaxLines: maxLines, MaxBytes: maxBytes}
	if len(lines) <= maxLines && len(content) <= maxBytes {
		t.Content, t.OutputLines, t.OutputBytes = content, len(lines), len(content)
		return t
	}
	t.Truncated = true
	reason := "lines"
	start, size := len(lines), 0
	for i := len(lines) - 1; i >= 0 && len(lines)-start < maxLines; i-- {
		b := len(lines[i])
		if start < len(lines) {
			b++
		}
		if size+b > maxBytes {
			reason = "bytes"
			if start == len(lines) {
				lines[i] = tailBytes(lines[i], maxBytes)
				start = i
				size = len(lines[i])
				t.LastLinePartial = true
			}
			break
		}
		start = i
		size += b
	}
	if len(lines)-start >= maxLines && size <= maxBytes {
		reason = "lines"
	}
	t.Content = strings.Join(lines[start:], "\n")
	t.TruncatedBy = by(reason)
	t.OutputLines, t.OutputBytes = len(lines)-start, len(t.Content)
	return t
}

// tailBytes returns at most max bytes from the end of s, starting at a
// UTF-8 character boundary.
func tailBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	start := len(s) - max
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// utf16Len is the length of s as a JavaScript string.
func utf16Len(s string) int {
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

// truncateLine cuts line to max UTF-16 units plus "... [truncated]", like
// pi's truncateLine.
func truncateLine(line string, max int) (string, bool) {
	if utf16Len(line) <= max {
		return line, false
	}
	n := 0
	for i, r := range line {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n+w > max {
			return line[:i] + "... [truncated]", true
		}
		n += w
	}
	return line, false
}

// decodeUTF8 returns b as a string with every invalid byte replaced by
// U+FFFD, like Node's Buffer.toString("utf-8").
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteString("\uFFFD")
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}
