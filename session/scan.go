package session

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
)

// The scanner below validates a JSON value and reports the byte spans of an
// object's keys and values without building any Go values. Loading a large
// session only needs a handful of envelope fields per line; everything else
// stays as raw bytes.

var errSyntax = errors.New("invalid JSON")

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString validates the string starting at b[i]=='"' and returns the
// index after the closing quote and whether it contains escapes.
func scanString(b []byte, i int) (int, bool, error) {
	i++
	esc := false
	for i < len(b) {
		// Skip 8 plain bytes at a time (no quote, backslash or control byte).
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, false, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false, errSyntax
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, false, errSyntax
					}
				}
				i += 6
			default:
				return 0, false, errSyntax
			}
		case c < 0x20:
			return 0, false, errSyntax
		default:
			i++
		}
	}
	return 0, false, errSyntax
}

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// special8 reports whether any of the 8 bytes in x is '"', '\\' or < 0x20.
func special8(x uint64) bool {
	q := x ^ (swarLo * '"')
	bs := x ^ (swarLo * '\\')
	return ((q-swarLo)&^q|(bs-swarLo)&^bs|(x-swarLo*0x20)&^x)&swarHi != 0
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func scanNumber(b []byte, i int) (int, error) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return 0, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, errSyntax
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, nil
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errSyntax
	}
	return i + len(lit), nil
}

// skipValue validates the JSON value at b[i:] (after whitespace) and returns
// the index just after it. Nesting is handled with an explicit stack, so
// deeply nested input cannot exhaust the goroutine stack.
func skipValue(b []byte, i int) (int, error) {
	var stack []byte
	var err error
	for {
		// Expect a value.
		i = skipWS(b, i)
		if i >= len(b) {
			return 0, errSyntax
		}
		opened := false
		switch c := b[i]; c {
		case '{', '[':
			j := skipWS(b, i+1)
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if j < len(b) && b[j] == closer {
				i = j + 1
				break
			}
			stack = append(stack, c)
			i = j
			opened = true
		case '"':
			i, _, err = scanString(b, i)
		case 't':
			i, err = scanLiteral(b, i, "true")
		case 'f':
			i, err = scanLiteral(b, i, "false")
		case 'n':
			i, err = scanLiteral(b, i, "null")
		default:
			i, err = scanNumber(b, i)
		}
		if err != nil {
			return 0, err
		}
		if opened {
			if stack[len(stack)-1] == '{' {
				if i, err = scanKeyColon(b, i); err != nil {
					return 0, err
				}
			}
			continue
		}
		// After a value: close containers or move to the next element.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, errSyntax
			}
			top := stack[len(stack)-1]
			c := b[i]
			if c == ',' {
				i++
				if top == '{' {
					if i, err = scanKeyColon(b, i); err != nil {
						return 0, err
					}
				}
				break
			}
			if top == '{' && c == '}' || top == '[' && c == ']' {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return 0, errSyntax
		}
	}
}

// scanKeyColon reads `"key" :` and returns the index after the colon.
func scanKeyColon(b []byte, i int) (int, error) {
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return 0, errSyntax
	}
	i, _, err := scanString(b, i)
	if err != nil {
		return 0, err
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, errSyntax
	}
	return i + 1, nil
}

// member is one key of a scanned object: the raw key (without quotes, maybe
// escaped) and the value span.
type member struct {
	ks, ke     int // the quoted key is b[ks:ke]
	key        []byte
	keyEsc     bool
	start, end int
}

// keyString returns the member's key, unescaping it when needed.
func (m member) keyString() string {
	if !m.keyEsc {
		return string(m.key)
	}
	var s string
	q := make([]byte, 0, len(m.key)+2)
	q = append(append(append(q, '"'), m.key...), '"')
	if json.Unmarshal(q, &s) != nil {
		return string(m.key)
	}
	return s
}

// scanObject validates the object at b[i] and calls fn(0, m) for each
// member in order, after its value was scanned. For a member whose value is
// an object, fn(-1, m) is asked first whether to descend: if it returns
// true, that object's members are reported as fn(1, m) before fn(0, m).
// All positions are indexes into b.
func scanObject(b []byte, i int, fn func(depth int, m member) bool) (int, error) {
	return scanObjectDepth(b, i, 0, fn)
}

func scanObjectDepth(b []byte, i, depth int, fn func(depth int, m member) bool) (int, error) {
	i = skipWS(b, i)
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
		ks := i
		ke, esc, err := scanString(b, i)
		if err != nil {
			return 0, err
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, errSyntax
		}
		vs := skipWS(b, i+1)
		m := member{ks: ks, ke: ke, key: b[ks+1 : ke-1], keyEsc: esc, start: vs}
		var ve int
		if depth == 0 && vs < len(b) && b[vs] == '{' && fn(-1, m) {
			ve, err = scanObjectDepth(b, vs, 1, fn)
		} else {
			ve, err = skipValue(b, vs)
		}
		if err != nil {
			return 0, err
		}
		m.end = ve
		fn(depth, m)
		i = skipWS(b, ve)
		if i >= len(b) {
			return 0, errSyntax
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		return 0, errSyntax
	}
}

// rawString decodes a JSON string value; ok is false for non-strings.
func rawString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	simple := true
	for _, c := range inner {
		if c == '\\' {
			simple = false
			break
		}
	}
	if simple {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// rawInt decodes a JSON number as int64 (floats are truncated).
func rawInt(v []byte) (int64, bool) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false
	}
	return int64(f), true
}
