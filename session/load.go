package session

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/pibot/pibot/llm"
)

// ErrNotSession is returned (wrapped, naming the file) when a file's first
// parsed line is not a session header.
var ErrNotSession = errors.New("not a session file")

// LineError describes one skipped line.
type LineError struct {
	Line   int    `json:"line"`   // 1-based line number
	Offset int64  `json:"offset"` // byte offset of the line
	Len    int    `json:"len"`    // bytes, without the newline
	Err    string `json:"err"`
}

// Report says what a load found and repaired.
type Report struct {
	Path           string            `json:"path"`
	FromVersion    int               `json:"fromVersion"`             // version before migration
	SkippedLines   []LineError       `json:"skippedLines,omitempty"`  // bad lines in the middle
	StaleFenced    []int             `json:"staleFenced,omitempty"`   // line numbers of stale-fenced entries
	TailBytes      int64             `json:"tailBytes,omitempty"`     // torn tail bytes (skipped or truncated)
	TailLine       int               `json:"tailLine,omitempty"`      // first line of the torn tail
	TailTruncated  bool              `json:"tailTruncated,omitempty"` // the tail was cut from the file
	BrokenCopy     string            `json:"brokenCopy,omitempty"`    // where the damaged file was copied
	MissingNewline bool              `json:"missingNewline,omitempty"`
	Reattached     map[string]string `json:"reattached,omitempty"`  // child id -> new parent id
	RepairEntry    string            `json:"repairEntry,omitempty"` // id of the pibot.repair entry written
	// Cycles are entries whose parentId made a loop (on which pi's context
	// walk never ends), by id, with the parentId they had; they are read
	// as roots, and a writable open rewrites them so.
	Cycles map[string]string `json:"cycles,omitempty"`
}

// Clean reports whether the file had no damage at all.
func (r Report) Clean() bool {
	return len(r.SkippedLines) == 0 && len(r.StaleFenced) == 0 && r.TailBytes == 0 &&
		len(r.Reattached) == 0 && !r.MissingNewline && len(r.Cycles) == 0
}

// node is an entry in memory: the stored bytes plus the envelope fields.
type node struct {
	raw      []byte
	typ      string
	id       string
	parentID string // "" = null
	ts       string
	line     int
	index    int // position among entries in file order
	// Where the line is in the file, its length and checksum: a lazily
	// loaded tree (Options.Lazy) holds no message's line (raw is nil)
	// and reads it there (bodyReader).
	off       int64
	size, sum uint32
	meta      *Meta
	fence     int64
	loc       string                      // resolved location
	role      string                      // message role
	provider  string                      // assistant provider
	model     string                      // assistant model
	msg       [2]int                      // span of the message object in raw
	ent       *Entry                      // decoded non-message entry
	decoded   atomic.Pointer[llm.Message] // decoded message: kept by Context.LLMMessages, or left by Append for a BranchCache to take
	parent    *node                       // resolved parent (nil = root)
	children  []*node
	// v1 migration
	fkIndex    int64
	hasFKIndex bool
	// damagedBefore: a bad line precedes this entry in the file.
	damagedBefore bool
}

// parsed is the result of parsing file bytes.
type parsed struct {
	header     Header
	headerRaw  []byte
	nodes      []*node
	report     Report
	tailOffset int64 // where the torn tail starts (== len(data) if none)
	maxFence   int64 // highest fence seen
	migrated   bool
	// damaged counts the skipped lines in the middle that are JSON
	// objects but damaged entries (entryDamage): a writable open
	// rewrites the file without them.
	damaged int
}

func internType(s []byte) string {
	switch string(s) {
	case TypeMessage:
		return TypeMessage
	case TypeThinkingLevelChange:
		return TypeThinkingLevelChange
	case TypeModelChange:
		return TypeModelChange
	case TypeCompaction:
		return TypeCompaction
	case TypeBranchSummary:
		return TypeBranchSummary
	case TypeCustom:
		return TypeCustom
	case TypeCustomMessage:
		return TypeCustomMessage
	case TypeLabel:
		return TypeLabel
	case TypeSessionInfo:
		return TypeSessionInfo
	case TypeSession:
		return TypeSession
	}
	return string(s)
}

// scanLine decodes the envelope of one line. ok is false when the line is
// not a JSON object.
func scanLine(line []byte) (*node, error) {
	n := &node{}
	if err := scanLineInto(n, line); err != nil {
		return nil, err
	}
	return n, nil
}

// scanLineInto is scanLine filling n, which must be zero.
func scanLineInto(n *node, line []byte) error { return scanKnownInto(n, line, nil) }

// scanKnownInto is scanLineInto for a line just encoded from enc (nil:
// not known): a string of the line equal to enc's is taken from enc, not
// copied out of the line, so indexing an appended line allocates no
// strings but the Meta's.
func scanKnownInto(n *node, line []byte, enc *Entry) error {
	n.raw = line
	var known Entry
	var msg llm.Message
	if enc != nil {
		known = *enc
		if enc.Message != nil {
			msg = *enc.Message
		}
	}
	var typeRaw, idRaw, parentRaw, tsRaw, metaRaw, fenceRaw, fkRaw, contentRaw []byte
	end, err := scanObject(line, 0, func(depth int, m member) bool {
		if depth == -1 { // asked whether to descend into an object value
			return string(m.key) == "message" && !m.keyEsc
		}
		if depth == 1 {
			switch string(m.key) {
			case "role":
				n.role = knownString(line[m.start:m.end], string(msg.Role))
			case "provider":
				n.provider = knownString(line[m.start:m.end], msg.Provider)
			case "model":
				n.model = knownString(line[m.start:m.end], msg.Model)
			}
			return false
		}
		v := line[m.start:m.end]
		key := string(m.key)
		if m.keyEsc {
			key = m.keyString()
		}
		switch key {
		case "type":
			typeRaw = v
		case "id":
			idRaw = v
		case "parentId":
			parentRaw = v
		case "timestamp":
			tsRaw = v
		case "pibot":
			metaRaw = v
		case "fence":
			fenceRaw = v
		case "firstKeptEntryIndex":
			fkRaw = v
		case "message":
			n.msg = [2]int{m.start, m.end}
		case "content":
			contentRaw = v
		}
		return false
	})
	if err != nil {
		return err
	}
	if skipWS(line, end) != len(line) {
		return errSyntax
	}
	if len(typeRaw) > 0 && typeRaw[0] == '"' {
		if s, ok := rawString(typeRaw); ok {
			n.typ = internType([]byte(s))
		}
	}
	n.id = knownString(idRaw, known.ID)
	n.parentID = knownString(parentRaw, known.ParentID)
	n.ts = knownString(tsRaw, known.Timestamp)
	if len(metaRaw) > 0 && metaRaw[0] == '{' {
		n.meta = decodeKnownMeta(metaRaw, known.Pibot)
	}
	if len(fenceRaw) > 0 {
		n.fence, _ = rawInt(fenceRaw)
	}
	if len(fkRaw) > 0 {
		n.fkIndex, n.hasFKIndex = rawInt(fkRaw)
	}
	if n.typ != TypeMessage {
		n.role, n.provider, n.model = "", "", ""
	}
	if enc == nil { // a line pibot just encoded is read back as it was written
		return entryDamage(n, contentRaw)
	}
	return nil
}

// knownString is the string JSON value v, taken from s when v is s
// quoted without escapes (then the two are equal), else decoded from v
// ("" when v is not a string).
func knownString(v []byte, s string) string {
	if len(v) == len(s)+2 && v[0] == '"' && string(v[1:len(v)-1]) == s {
		return s
	}
	d, _ := rawString(v)
	return d
}

// decodeKnownMeta decodes the pibot meta of a line, taking the strings
// equal to those of enc, the Meta it was just encoded from (nil: not
// known), from enc (knownString).
func decodeKnownMeta(raw []byte, enc *Meta) *Meta {
	var known Meta
	if enc != nil {
		known = *enc
	}
	m := &Meta{}
	_, err := scanObject(raw, 0, func(depth int, mb member) bool {
		if depth != 0 {
			return false
		}
		v := raw[mb.start:mb.end]
		switch mb.keyString() {
		case "loc":
			m.Loc = knownString(v, known.Loc)
		case "msg":
			m.Msg = knownString(v, known.Msg)
		case "from":
			m.From = knownString(v, known.From)
		}
		return false
	})
	if err != nil {
		return nil
	}
	return m
}

// parseData parses a whole file. name is used in errors only.
func parseData(data []byte, name string) (*parsed, error) {
	p := &parsed{tailOffset: int64(len(data))}
	p.report.Path = name
	type bad struct {
		le      LineError
		offset  int64
		damaged bool // a damaged entry, not a line that is not JSON
	}
	var bads []bad
	lines := scanLines(data)
	lastGood := -1 // len(bads) when the last good line was seen
	headerSeen := false
	var maxFence int64
	for li := range lines {
		l := &lines[li]
		lineNo := li + 1
		if l.blank {
			continue
		}
		n, err := l.n, l.err
		line := data[l.start:l.end]
		if err == nil && !l.nl {
			p.report.MissingNewline = true
		}
		if err == nil && !headerSeen {
			var h Header
			if h, err = decodeHeader(line); err != nil {
				if hv, ok := errors.AsType[*headerValueError](err); ok {
					return nil, fmt.Errorf("session: %s:%d: %w", name, lineNo, hv)
				}
				return nil, fmt.Errorf("session: %s:%d: %w: %v", name, lineNo, ErrNotSession, err)
			}
			p.header, p.headerRaw, headerSeen = h, line, true
			lastGood = len(bads)
			continue
		}
		if err != nil {
			bads = append(bads, bad{LineError{Line: lineNo, Offset: int64(l.start), Len: len(line), Err: err.Error()}, int64(l.start), errDamaged(err)})
			continue
		}
		lastGood = len(bads)
		if n.fence != 0 {
			if n.fence < maxFence {
				p.report.StaleFenced = append(p.report.StaleFenced, lineNo)
				continue
			}
			maxFence = n.fence
		}
		if n.typ == TypeSession {
			continue
		}
		n.line = lineNo
		n.index = len(p.nodes)
		n.damagedBefore = len(bads) > 0
		p.nodes = append(p.nodes, n)
	}
	if !headerSeen {
		return nil, fmt.Errorf("session: %s: %w: no session header", name, ErrNotSession)
	}
	p.maxFence = maxFence
	// Bad lines after the last good line form the torn tail.
	if lastGood < len(bads) {
		tail := bads[lastGood:]
		bads = bads[:lastGood]
		p.tailOffset = tail[0].offset
		p.report.TailBytes = int64(len(data)) - p.tailOffset
		p.report.TailLine = tail[0].le.Line
	}
	for _, b := range bads {
		p.report.SkippedLines = append(p.report.SkippedLines, b.le)
		if b.damaged {
			p.damaged++
		}
	}
	p.report.FromVersion = p.header.Version
	if p.report.FromVersion == 0 {
		p.report.FromVersion = 1
	}
	if p.header.Version < CurrentVersion {
		migrate(p)
	}
	return p, nil
}

func decodeHeader(line []byte) (Header, error) {
	h := Header{}
	idOK := false
	var bad error
	_, err := scanObject(line, 0, func(depth int, m member) bool {
		if depth != 0 {
			return false
		}
		v := line[m.start:m.end]
		switch k := m.keyString(); k {
		case "type":
			h.Type, _ = rawString(v)
		case "version":
			if n, verr := headerVersion(v); verr != nil {
				bad = verr
			} else {
				h.Version = n
			}
		case "id":
			h.ID, idOK = rawString(v)
		case "timestamp":
			h.Timestamp, _ = rawString(v)
		case "cwd":
			h.Cwd, _ = rawString(v)
		case "parentSession":
			h.ParentSession, _ = rawString(v)
		default:
			h.Extra = append(h.Extra, fieldOf(k, v))
		}
		return false
	})
	if err != nil {
		return h, err
	}
	if h.Type != TypeSession {
		return h, fmt.Errorf("first entry has type %q", h.Type)
	}
	if !idOK {
		return h, errors.New("header has no string id")
	}
	if bad != nil {
		return h, bad
	}
	return h, nil
}

func quoteKey(k string) []byte { return []byte(strconv.Quote(k)) }

// lineScan is one line of a file and the result of scanning it.
type lineScan struct {
	start, end int
	nl, blank  bool
	n          *node
	err        error
}

// parallelMin is the file size from which lines are scanned in parallel.
const parallelMin = 4 << 20

// scanLines splits data into lines (no length limit) and scans every
// non-blank line, in parallel for large files. All goroutines finish before
// it returns.
func scanLines(data []byte) []lineScan { return scanLinesFrom(data, true) }

// scanLinesFrom is scanLines over data that starts the file (first: white
// space before the header is not part of it) or a later line of it.
func scanLinesFrom(data []byte, first bool) []lineScan {
	lines := make([]lineScan, 0, 1+len(data)/1024)
	lead := 0
	if first {
		lead = leadingSpace(data)
	}
	for off := 0; off < len(data); {
		l := lineScan{start: off, end: len(data)}
		if nl := bytes.IndexByte(data[off:], '\n'); nl >= 0 {
			l.end, l.nl = off+nl, true
		}
		off = l.end + 1
		l.start = min(max(l.start, lead), l.end) // see leadingSpace
		l.blank = len(bytes.Trim(data[l.start:l.end], " \t\r")) == 0
		lines = append(lines, l)
	}
	scan := func(ls []lineScan) {
		for i := range ls {
			if !ls[i].blank {
				ls[i].n, ls[i].err = scanLine(data[ls[i].start:ls[i].end])
			}
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if len(data) < parallelMin || workers < 2 {
		scan(lines)
		return lines
	}
	workers = min(workers, 8)
	var wg sync.WaitGroup
	per := len(data)/workers + 1
	from := 0
	for w := 0; w < workers && from < len(lines); w++ {
		to := from
		limit := lines[from].start + per
		for to < len(lines) && (lines[to].start < limit || w == workers-1) {
			to++
		}
		part := lines[from:to]
		wg.Add(1)
		go func() {
			defer wg.Done()
			scan(part)
		}()
		from = to
	}
	wg.Wait()
	return lines
}
