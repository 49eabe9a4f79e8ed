// Package partialjson turns a truncated JSON object, as it arrives while a
// model streams tool-call arguments, into the most complete valid JSON
// object it can.
package partialjson

import "encoding/json"

// Repair returns a valid JSON value for the prefix s of a JSON document:
// open strings and containers are closed and a trailing incomplete member
// is dropped. ok is false when nothing valid can be recovered.
func Repair(s string) (out string, ok bool) {
	if json.Valid([]byte(s)) {
		return s, true
	}
	var (
		stack    []byte
		inStr    bool
		esc      bool
		cutPos   = -1
		cutStack []byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			stack = append(stack, c)
			cutPos, cutStack = i+1, append(cutStack[:0], stack...)
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			cutPos, cutStack = i, append(cutStack[:0], stack...)
		}
	}
	// First try: close the open string and containers as they are.
	head := s
	if inStr {
		head = trimEscape(head) + `"`
	}
	if cand := head + closers(stack); json.Valid([]byte(cand)) {
		return cand, true
	}
	// A key without a value or a half-written literal: cut back to the
	// last member boundary.
	if cutPos >= 0 {
		if cand := s[:cutPos] + closers(cutStack); json.Valid([]byte(cand)) {
			return cand, true
		}
	}
	return "", false
}

// trimEscape drops an unfinished escape sequence at the end of a string.
func trimEscape(s string) string {
	// Find the last backslash that starts an escape.
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	if n%2 == 1 {
		return s[:len(s)-1]
	}
	// An incomplete \uXXXX escape.
	for k := 1; k <= 5 && k <= len(s); k++ {
		if s[len(s)-k] == 'u' && len(s)-k-1 >= 0 && s[len(s)-k-1] == '\\' && k < 5 {
			bs := 0
			for j := len(s) - k - 1; j >= 0 && s[j] == '\\'; j-- {
				bs++
			}
			if bs%2 == 1 {
				return s[:len(s)-k-1]
			}
		}
	}
	return s
}

func closers(stack []byte) string {
	b := make([]byte, len(stack))
	for i, c := range stack {
		if c == '{' {
			b[len(stack)-1-i] = '}'
		} else {
			b[len(stack)-1-i] = ']'
		}
	}
	return string(b)
}

// Object returns a JSON object for the argument prefix s: the repaired
// object, or "{}" when s is empty or not an object.
func Object(s string) json.RawMessage {
	if out, ok := Repair(s); ok && len(out) > 0 && out[0] == '{' {
		return json.RawMessage(out)
	}
	return json.RawMessage("{}")
}
