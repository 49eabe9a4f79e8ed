package session

import (
	"bytes"
	"fmt"
)

// Walking a JSON object that the loader already validated, the quick way:
// what entryDamage's checks (damage.go, damagevalue.go) stand on.

// kind names the JSON type of the value v.
func kind(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// objIter walks the members of a JSON object already known to be valid
// (the loader validated the line), crossing values the quick way
// (looseSkip, bytes.IndexByte for strings): checking a message's types
// costs a fraction of reading it.
type objIter struct {
	b []byte
	i int
}

// members starts walking the object at v[at], or says what v[at:] is when
// it is not an object.
func members(v []byte, at int) (objIter, error) {
	if v[at] != '{' {
		return objIter{}, fmt.Errorf("%s, not an object", kind(v[at:]))
	}
	return objIter{b: v, i: at + 1}, nil
}

// nextKey returns the next member's key (unescaped) and where its value
// starts, or ok false after the last one; value or a move of it.i must
// follow.
func (it *objIter) nextKey() (key []byte, vs int, ok bool) {
	b := it.b
	i := skipWS(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = skipWS(b, i+1)
	}
	it.i = i
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ke := looseStringEnd(b, i)
	key = b[i+1 : ke-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		key = []byte(member{key: key, keyEsc: true}.keyString())
	}
	return key, skipWS(b, skipWS(b, ke)+1), true // after the colon
}

// value returns the value that starts at vs and moves past it.
func (it *objIter) value(vs int) []byte {
	it.i = looseValueEnd(it.b, vs)
	return it.b[vs:it.i]
}

// end is the index after the object, once nextKey said there is no more.
func (it *objIter) end() int { return it.i + 1 }

// msgField is one member of an object being checked.
type msgField struct{ key, v []byte }

// fieldList holds the members of an object, the first few without
// allocating.
type fieldList struct {
	head  [8]msgField
	n     int
	extra []msgField
}

func (l *fieldList) add(f msgField) {
	if l.n < len(l.head) {
		l.head[l.n] = f
		l.n++
		return
	}
	l.extra = append(l.extra, f)
}

// each calls fn with every member in order, until it returns an error.
func (l *fieldList) each(fn func(f msgField) error) error {
	for i := range l.n {
		if err := fn(l.head[i]); err != nil {
			return err
		}
	}
	for _, f := range l.extra {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// looseStringEnd returns the index after the string that starts at b[i].
func looseStringEnd(b []byte, i int) int {
	// Most strings of a message's frame are short: look at them directly.
	for j := i + 1; j < len(b) && j < i+24; j++ {
		switch b[j] {
		case '"':
			return j + 1
		case '\\':
			return looseStringEndFrom(b, i, i+1)
		}
	}
	return looseStringEndFrom(b, i, i+1)
}

// looseStringEndFrom is looseStringEnd looking for the closing quote from
// b[j] on.
func looseStringEndFrom(b []byte, i, j int) int {
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		n := 0
		for q-1-n > i && b[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// looseValueEnd returns the index after the value that starts at b[i].
func looseValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return looseStringEnd(b, i)
	case '{', '[':
		var sk looseSkip
		if k := sk.feed(b[i:]); k >= 0 {
			return i + k
		}
		return len(b)
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
		j++
	}
	return j
}
