package session

import (
	"errors"
	"fmt"

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

// errDamaged reports whether err (from scanLine) is an entry's damage
// rather than a line that is not a JSON object.
func errDamaged(err error) bool {
	_, ok := errors.AsType[*EntryDamageError](err)
	return ok
}
