package session

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/pibot/pibot/llm"
)

// The checks of a message member's value (see checkMessageField): strings,
// numbers, usage and cost, content blocks, each as llm.Message's decoder
// reads them.

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
