package tools

import (
	"os"
	"strings"
	"sync"
	"unicode/utf8"
)

// outputBuffer accumulates streaming command output with bounded memory,
// like pi's OutputAccumulator: it decodes UTF-8 incrementally, keeps a
// rolling tail for snapshots and spills the full raw output to a temp
// file once the output exceeds the limits; the file keeps at most
// maxFile bytes (0: no cap). Safe for concurrent use.
type outputBuffer struct {
	mu        sync.Mutex
	maxLines  int
	maxBytes  int
	rolling   int
	dir       *outputDir
	maxFile   int64
	fileBytes int64
	capped    bool   // the file reached maxFile
	pending   []byte // incomplete UTF-8 sequence from the previous chunk
	raw       [][]byte
	tail      string
	tailAtBOL bool // tail starts at a line boundary
	rawBytes  int
	decBytes  int
	lines     int
	lineBytes int // bytes of the current (last) line
	file      *os.File
	path      string
	fileErr   error
}

func newOutputBuffer(dir *outputDir, maxFile int64) *outputBuffer {
	return &outputBuffer{maxLines: DefaultMaxLines, maxBytes: DefaultMaxBytes, rolling: 2 * DefaultMaxBytes,
		dir: dir, maxFile: maxFile, tailAtBOL: true, lines: 1}
}

// startsWith reports whether the output kept in memory begins with p (a
// short message written at once, such as bwrap's own error).
func (o *outputBuffer) startsWith(p string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.raw) > 0 && strings.HasPrefix(string(o.raw[0]), p)
}

// Write appends a chunk of raw output.
func (o *outputBuffer) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rawBytes += len(p)
	buf := append(o.pending, p...)
	cut := len(buf)
	// Keep an incomplete trailing sequence for the next chunk.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	o.appendText(decodeUTF8(buf[:cut]))
	o.pending = append([]byte(nil), buf[cut:]...)
	if o.file != nil || o.overLimits() {
		o.ensureFile()
		o.writeFile(p)
	} else {
		o.raw = append(o.raw, append([]byte(nil), p...))
	}
	return len(p), nil
}

func (o *outputBuffer) appendText(s string) {
	if s == "" {
		return
	}
	o.decBytes += len(s)
	o.tail += s
	if len(o.tail) > 2*o.rolling {
		start := len(o.tail) - o.rolling
		for start < len(o.tail) && !utf8.RuneStart(o.tail[start]) {
			start++
		}
		o.tailAtBOL = o.tail[start-1] == '\n'
		o.tail = o.tail[start:]
	}
	if nl := strings.Count(s, "\n"); nl == 0 {
		o.lineBytes += len(s)
	} else {
		o.lines += nl
		o.lineBytes = len(s) - strings.LastIndexByte(s, '\n') - 1
	}
}

func (o *outputBuffer) overLimits() bool {
	return o.rawBytes > o.maxBytes || o.decBytes > o.maxBytes || o.lines > o.maxLines
}

func (o *outputBuffer) ensureFile() {
	if o.file != nil || o.fileErr != nil {
		return
	}
	f, path, err := o.dir.create()
	if err != nil {
		o.fileErr = err
		return
	}
	o.file, o.path = f, path
	for _, c := range o.raw {
		o.writeFile(c)
	}
	o.raw = nil
}

// writeFile appends p to the full-output file up to maxFile bytes, then
// notes once that the rest was dropped.
func (o *outputBuffer) writeFile(p []byte) {
	if o.file == nil || o.capped {
		return
	}
	if o.maxFile > 0 && o.fileBytes+int64(len(p)) > o.maxFile {
		p = p[:o.maxFile-o.fileBytes]
		o.capped = true
	}
	n, _ := o.file.Write(p) // best effort; fileErr reports open failures
	o.fileBytes += int64(n)
	if o.capped {
		o.file.Write([]byte("\n[pibot: full output cut at " + formatSize(int(o.maxFile)) + " (agent.limits.output)]\n")) //nolint:errcheck // best effort
	}
}

// finish flushes an incomplete trailing sequence as U+FFFD.
func (o *outputBuffer) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		o.appendText(decodeUTF8(o.pending))
		o.pending = nil
	}
	if o.overLimits() {
		o.ensureFile()
	}
}

// close closes the temp file.
func (o *outputBuffer) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.file == nil {
		return nil
	}
	err := o.file.Close()
	o.file = nil
	return err
}

type snapshot struct {
	content    string
	truncation Truncation
	fullPath   string
	lastLine   int
}

// snapshot returns the tail truncated to the limits, with totals over the
// whole output; a truncated output is persisted to the temp file.
func (o *outputBuffer) snapshot() snapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	text := o.tail
	if !o.tailAtBOL {
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[i+1:]
		}
	}
	t := truncateTail(text, o.maxLines, o.maxBytes)
	truncated := o.lines > o.maxLines || o.decBytes > o.maxBytes
	t.Truncated = truncated
	switch {
	case !truncated:
		t.TruncatedBy = nil
	case t.TruncatedBy == nil && o.decBytes > o.maxBytes:
		t.TruncatedBy = by("bytes")
	case t.TruncatedBy == nil:
		t.TruncatedBy = by("lines")
	}
	t.TotalLines, t.TotalBytes = o.lines, o.decBytes
	if truncated {
		o.ensureFile()
	}
	return snapshot{content: t.Content, truncation: t, fullPath: o.path, lastLine: o.lineBytes}
}
