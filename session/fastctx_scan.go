package session

import (
	"bytes"
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

// scan parses the envelope of one line without side effects. The header
// (the first non-blank line: header is true) is scanned and decoded whole. An entry is
// scanned up to a top-level "message" object, whose start is returned
// (-1 when the whole line was scanned).
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
	if id, parent, fence, stop, ok := piPrefix(line); ok {
		e := envelope{msg: true}
		e.id, _ = x.hashString(id)
		e.parent, e.root = x.hashString(parent)
		if fence != nil {
			e.fence, _ = rawInt(fence)
		}
		return e, stop, nil
	}
	var typ, id, parent, fence []byte
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
		if esc {
			key = []byte(member{key: key, keyEsc: true}.keyString())
		}
		switch string(key) {
		case "type":
			typ = line[vs:ve]
		case "id":
			id = line[vs:ve]
		case "parentId":
			parent = line[vs:ve]
		case "fence":
			fence = line[vs:ve]
		}
		return ve, false
	})
	if err != nil {
		return envelope{}, -1, err
	}
	if stop < 0 && skipWS(line, i) != len(line) {
		return envelope{}, -1, errSyntax
	}
	var e envelope
	if s, ok := rawString(typ); ok {
		e.session, e.msg = s == TypeSession, s == TypeMessage
	}
	e.id, _ = x.hashString(id)
	var empty bool
	e.parent, empty = x.hashString(parent)
	e.root = empty
	if len(fence) > 0 {
		e.fence, _ = rawInt(fence)
	}
	return e, stop, nil
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

// trailingFence reads a fence written after the message (`,"fence":N}` at
// the end of t, which ends with '}'), as pibot did before it wrote it in
// front: in a valid line that can only be the top-level member.
func trailingFence(t []byte) (int64, bool) {
	t = t[:len(t)-1]
	j := len(t)
	for j > 0 && (isDigit(t[j-1]) || bytes.IndexByte([]byte("-+.eE"), t[j-1]) >= 0) {
		j--
	}
	if j == len(t) || !bytes.HasSuffix(t[:j], []byte(`,"fence":`)) {
		return 0, false
	}
	v, _ := rawInt(t[j:])
	return v, true
}
