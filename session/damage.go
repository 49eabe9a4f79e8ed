package session

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/pibot/pibot/llm"
)

// EntryDamageError is why a line that is a JSON object is still not an
// entry pibot can use (see entryDamage). It is matched by errors.As.
type EntryDamageError struct{ Reason string }

func (e *EntryDamageError) Error() string { return e.Reason }

func damaged(format string, args ...any) error {
	return &EntryDamageError{Reason: fmt.Sprintf(format, args...)}
}

// entryDamage is the one rule for what, beyond not being a JSON object,
// makes a line a damaged entry: a message entry whose message is missing,
// is not an object, or is one llm.Message cannot read (a role that is not
// a string, a content of blocks that are not objects, a usage or a
// timestamp that is not a number, ...), and a custom_message whose content
// cannot be a message's. Everything that reads a session applies it
// through scanLine: the loader skips such a line as it skips one that is
// not JSON (its children re-attached, the line reported), WriteContext
// falls back to the loader when a line it reads is one, and a writable
// open (pibot session repair, and the gateway when it loads a session)
// rewrites the file without it, keeping a .broken copy. A session that
// loads therefore has no message the agent cannot read. content is the
// raw top-level "content" member (nil when absent).
func entryDamage(n *node, content []byte) error {
	switch n.typ {
	case TypeMessage:
		if n.msg == [2]int{} {
			return damaged("message entry without a message")
		}
		if err := checkMessage(n.raw[n.msg[0]:n.msg[1]]); err != nil {
			return damaged("message: %v", err)
		}
	case TypeCustomMessage:
		if content != nil && content[0] != '"' && string(content) != "null" {
			if _, err := checkBlocks(content, 0); err != nil {
				return damaged("custom_message content: %v", err)
			}
		}
	}
	return nil
}

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

// checkMessage says why raw is a message llm.Message.UnmarshalJSON
// refuses, or nil. It follows that decoder member by member (and
// encoding/json beneath it); FuzzCheckMessage holds the two to the same
// answers. The decoder reads the last "role" first: when the message
// starts with its only role (as pi and pibot write it), one pass checks
// every member; otherwise a second one does.
func checkMessage(raw []byte) error {
	it, err := members(raw, 0)
	if err != nil {
		return err
	}
	var role llm.Role
	first, roles := true, 0
	var firstErr error
	for key, vs, ok := it.nextKey(); ok; key, vs, ok = it.nextKey() {
		if string(key) == "role" {
			roles++
			if role, err = roleOf(it.value(vs)); err != nil {
				return err
			}
			if !first || roles > 1 {
				return checkMessageSlow(raw)
			}
			first = false
			continue
		}
		first = false
		if firstErr != nil {
			it.value(vs)
			continue
		}
		if string(key) == "content" && raw[vs] == '[' && blocksRole(role) {
			// The blocks are checked as they are crossed.
			if it.i, err = checkBlocks(raw, vs); err != nil {
				firstErr = fmt.Errorf(`"content": %w`, err)
			}
			continue
		}
		if err := checkMessageField(role, key, it.value(vs)); err != nil {
			firstErr = fmt.Errorf("%q: %w", key, err)
		}
	}
	return firstErr
}

// checkMessageSlow is checkMessage for a message whose role is not its
// first member or is given more than once: the last role counts.
func checkMessageSlow(raw []byte) error {
	it, _ := members(raw, 0)
	var fs fieldList
	for key, vs, ok := it.nextKey(); ok; key, vs, ok = it.nextKey() {
		fs.add(msgField{key: key, v: it.value(vs)})
	}
	var role llm.Role
	err := fs.each(func(f msgField) (err error) {
		if string(f.key) == "role" {
			role, err = roleOf(f.v)
		}
		return err
	})
	if err != nil {
		return err
	}
	return fs.each(func(f msgField) error {
		if string(f.key) == "role" {
			return nil
		}
		if err := checkMessageField(role, f.key, f.v); err != nil {
			return fmt.Errorf("%q: %w", f.key, err)
		}
		return nil
	})
}

// roleOf reads a "role" member as the decoder does (null is no role).
func roleOf(v []byte) (llm.Role, error) {
	switch {
	case string(v) == "null":
		return "", nil
	case v[0] == '"':
		switch string(v[1 : len(v)-1]) { // no allocation for these
		case string(llm.RoleUser):
			return llm.RoleUser, nil
		case string(llm.RoleAssistant):
			return llm.RoleAssistant, nil
		case string(llm.RoleToolResult):
			return llm.RoleToolResult, nil
		}
		s, _ := rawString(v)
		return llm.Role(s), nil
	}
	return "", fmt.Errorf(`"role" is %s`, kind(v))
}

// blocksRole says whether a message of the role reads its content (that
// is not a string or null) as blocks.
func blocksRole(role llm.Role) bool {
	switch role {
	case llm.RoleBashExecution, llm.RoleBranchSummary, llm.RoleCompactionSummary:
		return false
	}
	return true
}

// What a member of a message must be (see checkMessageField).
const (
	anyValue = iota
	isString
	isBool
	isInt     // encoding/json's int: an integer literal
	isInt64   // the same, 64 bits
	isNumeric // a json.Number read as int64 or float64 (token counts, timestamps)
	isUsage
	isBlocks
)

// checkMessageField checks one member of a message of the given role.
func checkMessageField(role llm.Role, key []byte, v []byte) error {
	if string(v) == "null" {
		return nil // kept as it is
	}
	want := anyValue
	switch string(key) {
	case "content":
		if blocksRole(role) && v[0] != '"' {
			want = isBlocks
		}
	case "timestamp":
		want = isNumeric
	}
	switch role {
	case llm.RoleAssistant:
		switch string(key) {
		case "api", "provider", "model", "responseModel", "responseId", "stopReason", "errorMessage":
			want = isString
		case "usage":
			want = isUsage
		}
	case llm.RoleToolResult:
		switch string(key) {
		case "toolCallId", "toolName":
			want = isString
		case "isError":
			want = isBool
		}
	case llm.RoleBashExecution:
		switch string(key) {
		case "command", "output", "fullOutputPath":
			want = isString
		case "exitCode":
			want = isInt
		case "cancelled", "truncated", "excludeFromContext":
			want = isBool
		}
	case llm.RoleCustom:
		switch string(key) {
		case "customType":
			want = isString
		case "display":
			want = isBool
		}
	case llm.RoleBranchSummary, llm.RoleCompactionSummary:
		switch string(key) {
		case "summary":
			want = isString
		case "fromId":
			if role == llm.RoleBranchSummary {
				want = isString
			}
		case "tokensBefore":
			if role == llm.RoleCompactionSummary {
				want = isInt64
			}
		}
	}
	return checkValue(want, v)
}

// checkValue checks the non-null value v against want.
func checkValue(want int, v []byte) error {
	switch want {
	case isString:
		if v[0] != '"' {
			return fmt.Errorf("%s, not a string", kind(v))
		}
	case isBool:
		if v[0] != 't' && v[0] != 'f' {
			return fmt.Errorf("%s, not a boolean", kind(v))
		}
	case isInt, isInt64:
		bits := 64
		if want == isInt {
			bits = strconv.IntSize
		}
		if _, err := strconv.ParseInt(string(v), 10, bits); err != nil {
			return fmt.Errorf("%s, not an integer", v)
		}
	case isNumeric:
		return checkNumeric(v)
	case isUsage:
		return checkUsage(v)
	case isBlocks:
		_, err := checkBlocks(v, 0)
		return err
	}
	return nil
}

// checkNumeric checks what a json.Number read as an int64 or a float64
// takes: a number (or, as encoding/json allows, a string holding one) that
// fits a float64.
func checkNumeric(v []byte) error {
	n := v
	switch {
	case v[0] == '"':
		s, _ := rawString(v)
		if end, err := scanNumber([]byte(s), 0); err != nil || end != len(s) {
			return fmt.Errorf("%s, not a number", v)
		}
		n = []byte(s)
	case v[0] != '-' && !isDigit(v[0]):
		return fmt.Errorf("%s, not a number", kind(v))
	}
	if !fitsFloat(n) {
		return fmt.Errorf("%s, out of range", v)
	}
	return nil
}

// fitsFloat says whether strconv.ParseFloat reads the JSON number n
// without an error: only a magnitude beyond float64's fails, which takes
// an exponent or some 300 digits.
func fitsFloat(n []byte) bool {
	exp := len(n) >= 300
	for _, c := range n {
		exp = exp || c == 'e' || c == 'E'
	}
	if !exp {
		return true
	}
	_, err := strconv.ParseFloat(string(n), 64)
	return err == nil
}

// checkUsage checks an assistant message's usage (llm.Usage).
func checkUsage(v []byte) error {
	it, err := members(v, 0)
	if err != nil {
		return err
	}
	for key, vs, ok := it.nextKey(); ok; key, vs, ok = it.nextKey() {
		f := it.value(vs)
		if string(f) == "null" {
			continue
		}
		switch string(key) {
		case "input", "output", "cacheRead", "cacheWrite", "totalTokens":
			err = checkNumeric(f)
		case "cost":
			err = checkCost(f)
		}
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
	}
	return nil
}

// costFields are llm.Cost's members; encoding/json matches a key to one
// of them ignoring case.
var costFields = [...]string{"input", "output", "cacheRead", "cacheWrite", "total"}

// checkCost checks the cost of a usage (llm.Cost, read by encoding/json).
func checkCost(v []byte) error {
	it, err := members(v, 0)
	if err != nil {
		return err
	}
	for key, vs, ok := it.nextKey(); ok; key, vs, ok = it.nextKey() {
		f := it.value(vs)
		known := false
		switch string(key) {
		case "input", "output", "cacheRead", "cacheWrite", "total":
			known = true
		default:
			for _, k := range costFields {
				known = known || bytes.EqualFold(key, []byte(k))
			}
		}
		if !known || string(f) == "null" {
			continue
		}
		if f[0] != '-' && !isDigit(f[0]) {
			return fmt.Errorf("%q: %s, not a number", key, kind(f))
		}
		if !fitsFloat(f) {
			return fmt.Errorf("%q: %s, out of range", key, f)
		}
	}
	return nil
}

// checkBlocks checks the content blocks (a []llm.Content) that start at
// b[at] and returns the index after them.
func checkBlocks(b []byte, at int) (int, error) {
	if b[at] != '[' {
		return 0, fmt.Errorf("%s, not a string or blocks", kind(b[at:]))
	}
	i := skipWS(b, at+1)
	for n := 0; i < len(b) && b[i] != ']'; n++ {
		end, err := checkBlock(b, i)
		if err != nil {
			return 0, fmt.Errorf("block %d: %w", n, err)
		}
		if i = skipWS(b, end); i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return i + 1, nil
}

// checkBlock checks the content block at b[at] (llm.Content.UnmarshalJSON)
// and returns the index after it.
func checkBlock(b []byte, at int) (int, error) {
	it, err := members(b, at)
	if err != nil {
		return 0, err
	}
	var fs fieldList
	var typ []byte
	for key, vs, ok := it.nextKey(); ok; key, vs, ok = it.nextKey() {
		f := msgField{key: key, v: it.value(vs)}
		fs.add(f)
		if string(key) != "type" || string(f.v) == "null" {
			continue // null leaves the type read before
		}
		if f.v[0] != '"' {
			return 0, fmt.Errorf(`"type" is %s`, kind(f.v))
		}
		typ = f.v
	}
	end := it.end()
	var t llm.ContentType
	if len(typ) >= 2 {
		switch string(typ[1 : len(typ)-1]) { // no allocation for these
		case string(llm.ContentText):
			t = llm.ContentText
		case string(llm.ContentThinking):
			t = llm.ContentThinking
		case string(llm.ContentImage):
			t = llm.ContentImage
		case string(llm.ContentToolCall):
			t = llm.ContentToolCall
		default:
			s, _ := rawString(typ)
			t = llm.ContentType(s)
		}
	}
	err = fs.each(func(f msgField) error {
		if string(f.v) == "null" {
			return nil
		}
		want := anyValue
		switch t {
		case llm.ContentText:
			if k := string(f.key); k == "text" || k == "textSignature" {
				want = isString
			}
		case llm.ContentThinking:
			switch string(f.key) {
			case "thinking", "thinkingSignature":
				want = isString
			case "redacted":
				want = isBool
			}
		case llm.ContentImage:
			if k := string(f.key); k == "data" || k == "mimeType" {
				want = isString
			}
		case llm.ContentToolCall:
			if k := string(f.key); k == "id" || k == "name" || k == "thoughtSignature" {
				want = isString
			}
		}
		if err := checkValue(want, f.v); err != nil {
			return fmt.Errorf("%q: %w", f.key, err)
		}
		return nil
	})
	return end, err
}

// errDamaged reports whether err (from scanLine) is an entry's damage
// rather than a line that is not a JSON object.
func errDamaged(err error) bool {
	_, ok := errors.AsType[*EntryDamageError](err)
	return ok
}
