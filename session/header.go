package session

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// headerValueError is a header member pibot cannot read as pi would. It
// is not ErrNotSession: the file is a session file, and a caller that
// would replace a file that is not one must leave this one alone.
type headerValueError struct {
	key, value, fix string
}

func (e *headerValueError) Error() string {
	return fmt.Sprintf("header %q is %s: %s", e.key, e.value, e.fix)
}

// headerVersion reads the header's "version" as pi compares it (pi
// migrates when `version ?? 1` is below 3, with JavaScript's coercion):
// a number, or a string holding a decimal number (pi reads "3" as 3),
// and null like no version at all (version 1). Below 2 it is 1 (pi
// migrates from version 1), below 3 it is 2. Anything else (true, an
// object, "three", "") is an error: pi would either migrate a tree as a
// version-1 list or leave an unknown version alone, and both guess.
func headerVersion(v []byte) (int, error) {
	f, ok := 0.0, false
	switch {
	case string(v) == "null":
		return 0, nil
	case len(v) > 0 && v[0] == '"':
		if s, isStr := rawString(v); isStr {
			f, ok = decimal(strings.TrimFunc(s, isJSSpace))
		}
	case len(v) > 0 && (v[0] == '-' || isDigit(v[0])):
		f, ok = decimal(string(v))
	}
	if !ok {
		return 0, &headerValueError{key: "version", value: string(v),
			fix: fmt.Sprintf("not a version number; set it to %d (or remove it from a version-1 file)", CurrentVersion)}
	}
	switch {
	case f < 2:
		return 1, nil
	case f < CurrentVersion:
		return 2, nil
	}
	return int(min(f, math.MaxInt32)), nil
}

// decimal parses s as a JSON number (a version beyond float64's range is
// +Inf, as in JavaScript).
func decimal(s string) (float64, bool) {
	if s == "" {
		return 0, false
	}
	if end, err := scanNumber([]byte(s), 0); err != nil || end != len(s) {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// isJSSpace reports whether r is white space to JavaScript's
// String.prototype.trim (its WhiteSpace and LineTerminator, the byte order
// mark included).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// leadingSpace returns how many bytes of white space start data. pi reads
// a file as content.trim() split into lines, so a byte order mark (or any
// other white space) before the header is not part of it.
func leadingSpace(data []byte) int {
	i := 0
	for i < len(data) {
		if c := data[i]; c < utf8.RuneSelf {
			if !isJSSpace(rune(c)) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if !isJSSpace(r) {
			return i
		}
		i += size
	}
	return i
}
