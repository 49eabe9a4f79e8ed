package session

import (
	"bytes"
	"errors"
	"hash/maphash"
)

// envelope is what the index keeps of one scanned line.
type envelope struct {
	blank, header bool
	version       int  // header only
	session       bool // an entry of type "session": not a tree node
	msg           bool // an entry of type "message"
	fence         int64
	id, parent    uint64
	root          bool
}

// envRaw holds the raw JSON of a line's envelope members; of a member
// given twice the last counts, as in the full loader.
type envRaw struct{ typ, id, parent, fence []byte }

// member records one top-level member of an entry line.
func (r *envRaw) member(key []byte, esc bool, v []byte) {
	if esc {
		key = []byte(member{key: key, keyEsc: true}.keyString())
	}
	switch string(key) {
	case "type":
		r.typ = v
	case "id":
		r.id = v
	case "parentId":
		r.parent = v
	case "fence":
		r.fence = v
	}
}

// envelope turns the raw members into what the index keeps.
func (x *fastCtx) envelope(r envRaw) envelope {
	var e envelope
	if s, ok := rawString(r.typ); ok {
		e.session, e.msg = s == TypeSession, s == TypeMessage
	}
	e.id, _ = x.hashString(r.id)
	e.parent, e.root = x.hashString(r.parent)
	if len(r.fence) > 0 {
		e.fence, _ = rawInt(r.fence)
	}
	return e
}

// scan parses the envelope of one whole line without side effects. The
// header (the first non-blank line: header is true) is scanned and decoded
// whole. An entry's members are all read, but the value of a top-level
// "message" object is only skipped over (see looseSkip), not validated:
// its start is returned (-1 when the line has none and was validated
// whole).
func (x *fastCtx) scan(line []byte, header bool) (envelope, int, error) {
	if (len(line) == 0 || line[0] != '{') && len(bytes.Trim(line, " \t\r")) == 0 {
		return envelope{blank: true}, -1, nil
	}
	if header {
		if _, err := scanLine(line); err != nil {
			return envelope{}, -1, notFast("header: " + err.Error())
		}
		h, err := decodeHeader(line)
		if err != nil {
			return envelope{}, -1, notFast("header: " + err.Error())
		}
		return envelope{header: true, version: h.Version}, -1, nil
	}
	r, stop, err := scanPrefix(line)
	if err != nil {
		return envelope{}, -1, err
	}
	if stop >= 0 {
		var sk looseSkip
		end := sk.feed(line[stop:])
		if end < 0 {
			return envelope{}, -1, errors.New("the line does not end its message")
		}
		if err := scanRest(line[stop+end:], &r); err != nil {
			return envelope{}, -1, err
		}
	}
	return x.envelope(r), stop, nil
}

// scanPrefix reads an entry line's members up to a top-level "message"
// object, whose start it returns (-1: the line has none and was read
// whole, and validated). The members after the message are read by
// scanRest.
func scanPrefix(line []byte) (envRaw, int, error) {
	if id, parent, fence, stop, ok := piPrefix(line); ok {
		return envRaw{typ: []byte(`"message"`), id: id, parent: parent, fence: fence}, stop, nil
	}
	var r envRaw
	stop := -1
	i, err := scanMembers(line, func(key []byte, esc bool, vs int) (int, bool) {
		if !esc && string(key) == "message" && line[vs] == '{' {
			stop = vs
			return 0, true
		}
		ve, err := skipValue(line, vs)
		if err != nil {
			return -1, false
		}
		r.member(key, esc, line[vs:ve])
		return ve, false
	})
	if err != nil {
		return envRaw{}, -1, err
	}
	if stop < 0 && skipWS(line, i) != len(line) {
		return envRaw{}, -1, errSyntax
	}
	return r, stop, nil
}

// scanRest reads the members of an entry line that follow its message
// (rest starts right after the message's value and runs to the end of the
// line) into r, validating them.
func scanRest(rest []byte, r *envRaw) error {
	i := skipWS(rest, 0)
	for i < len(rest) && rest[i] == ',' {
		i = skipWS(rest, i+1)
		if i >= len(rest) || rest[i] != '"' {
			return errSyntax
		}
		ke, esc, err := scanString(rest, i)
		if err != nil {
			return err
		}
		key := rest[i+1 : ke-1]
		i = skipWS(rest, ke)
		if i >= len(rest) || rest[i] != ':' {
			return errSyntax
		}
		vs := skipWS(rest, i+1)
		ve, err := skipValue(rest, vs)
		if err != nil {
			return err
		}
		r.member(key, esc, rest[vs:ve])
		i = skipWS(rest, ve)
	}
	if i >= len(rest) || rest[i] != '}' || skipWS(rest, i+1) != len(rest) {
		return errSyntax
	}
	return nil
}

// looseSkip finds the end of a JSON object or array fed to it in pieces,
// the first starting at its opening bracket. It only follows strings and
// brackets: on valid JSON it finds the value's end exactly, and it never
// validates (the bytes of a message the answer does not hold are not
// checked; see WriteContext). Strings, most of a message, are crossed by
// bytes.IndexByte.
type looseSkip struct {
	depth int
	inStr bool
	// odd: inside a string, the bytes fed so far end with an odd number
	// of backslashes (the next quote is escaped)
	odd bool
}

// feed consumes p and returns the index in p just after the value's end,
// or -1 when the value goes on past p.
func (s *looseSkip) feed(p []byte) int {
	i := 0
	for i < len(p) {
		if s.inStr {
			k := bytes.IndexByte(p[i:], '"')
			if k < 0 {
				s.odd = trailingBackslashesOdd(p[i:], s.odd)
				return -1
			}
			j := i + k
			escaped := trailingBackslashesOdd(p[i:j], s.odd)
			s.odd = false
			i = j + 1
			if !escaped {
				s.inStr = false
			}
			continue
		}
		switch p[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return -1
}

// trailingBackslashesOdd says whether b ends with an odd number of
// backslashes, counting those before b (odd: an odd number) when b is all
// backslashes.
func trailingBackslashesOdd(b []byte, odd bool) bool {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	if n == len(b) {
		return odd != (n%2 == 1)
	}
	return n%2 == 1
}

// piPrefix reads the envelope of a message line in the layout pi writes,
// {"type":"message","id":"…","parentId":"…"|null,"timestamp":"…","message":{,
// with plain strings (no escapes), and pibot's "pibot" and "fence" members
// in front of the message: the id, parentId and fence values as raw JSON
// and where the message starts. ok is false for any other shape (the
// general scan reads it).
func piPrefix(line []byte) (id, parent, fence []byte, stop int, ok bool) {
	const start = `{"type":"message","id":`
	if !bytes.HasPrefix(line, []byte(start)) {
		return nil, nil, nil, 0, false
	}
	i := len(start)
	if id, i = plainString(line, i); id == nil || !bytes.HasPrefix(line[i:], []byte(`,"parentId":`)) {
		return nil, nil, nil, 0, false
	}
	i += len(`,"parentId":`)
	if bytes.HasPrefix(line[i:], []byte("null")) {
		parent, i = line[i:i+4], i+4
	} else if parent, i = plainString(line, i); parent == nil {
		return nil, nil, nil, 0, false
	}
	if !bytes.HasPrefix(line[i:], []byte(`,"timestamp":`)) {
		return nil, nil, nil, 0, false
	}
	var ts []byte
	if ts, i = plainString(line, i+len(`,"timestamp":`)); ts == nil {
		return nil, nil, nil, 0, false
	}
	for {
		rest := line[i:]
		switch {
		case bytes.HasPrefix(rest, []byte(`,"message":{`)):
			return id, parent, fence, i + len(`,"message":`), true
		case bytes.HasPrefix(rest, []byte(`,"pibot":{`)) && fence == nil:
			end, err := skipValue(line, i+len(`,"pibot":`))
			if err != nil {
				return nil, nil, nil, 0, false
			}
			i = end
		case bytes.HasPrefix(rest, []byte(`,"fence":`)) && fence == nil:
			vs := i + len(`,"fence":`)
			end, err := scanNumber(line, vs)
			if err != nil {
				return nil, nil, nil, 0, false
			}
			fence, i = line[vs:end], end
		default:
			return nil, nil, nil, 0, false
		}
	}
}

// plainString returns the JSON string at b[i] (quotes included) and the
// index after it, or nil when there is none or it has an escape or a
// control character.
func plainString(b []byte, i int) ([]byte, int) {
	if i >= len(b) || b[i] != '"' {
		return nil, i
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i : j+1], j + 1
		case c == '\\' || c < 0x20:
			return nil, i
		}
	}
	return nil, i
}

// scanMembers walks the members of the object that starts line, calling
// fn with each key and the start of its value; fn returns the end of the
// value (-1: invalid), or stop to end the walk there. It returns the index
// after the object.
func scanMembers(b []byte, fn func(key []byte, esc bool, vs int) (int, bool)) (int, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, errSyntax
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return 0, errSyntax
		}
		ke, esc, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		vs := skipWS(b, i+1)
		if vs >= len(b) {
			return 0, errSyntax
		}
		ve, stop := fn(key, esc, vs)
		if stop {
			return vs, nil
		}
		if ve < 0 {
			return 0, errSyntax
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return 0, errSyntax
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return i + 1, nil
		default:
			return 0, errSyntax
		}
	}
}

// hashString hashes the string a raw JSON value decodes to ("" for a
// non-string, like the full loader) and says whether it is empty.
func (x *fastCtx) hashString(v []byte) (uint64, bool) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		inner := v[1 : len(v)-1]
		return maphash.Bytes(x.seed, inner), len(inner) == 0
	}
	s, _ := rawString(v)
	return maphash.String(x.seed, s), s == ""
}
