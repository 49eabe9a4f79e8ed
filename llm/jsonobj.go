package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// Field is one key of a JSON object whose meaning pibot does not know; it is
// kept verbatim so that it survives a decode/encode cycle.
type Field struct {
	Key   string
	Value json.RawMessage
}

// decodeObject splits a JSON object into its keys and raw values, in order.
func decodeObject(data []byte) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected a JSON object")
	}
	var out []Field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("expected an object key")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		out = append(out, Field{Key: key, Value: raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return out, nil
}

// objWriter appends a JSON object to b, with keys in the order they are
// written. Values pibot encodes itself (strings, numbers, messages, their
// blocks and usage) are appended in place; others go through
// encoding/json. Raw values are appended as they are (see contents for
// blocks).
type objWriter struct {
	b     []byte
	first bool
	err   error
}

// newObjWriter starts an object at the end of dst.
func newObjWriter(dst []byte) objWriter {
	return objWriter{b: append(dst, '{'), first: true}
}

func (w *objWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = AppendJSONString(w.b, k)
	w.b = append(w.b, ':')
}

// PlainJSONString reports whether s encodes in JSON as itself between
// quotes: printable ASCII without '"' and '\\'.
func PlainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// intVal writes key:v.
func (w *objWriter) intVal(k string, v int64) {
	if w.err != nil {
		return
	}
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}

// floatVal writes key:v as encoding/json does (an error for NaN and
// infinities).
func (w *objWriter) floatVal(k string, v float64) {
	if w.err != nil {
		return
	}
	w.key(k)
	w.b, w.err = appendJSONFloat(w.b, v)
}

// val writes key:value with encoding/json semantics (no HTML escaping).
func (w *objWriter) val(k string, v any) {
	if w.err != nil {
		return
	}
	switch x := v.(type) {
	case json.RawMessage:
		w.key(k)
		w.b = append(w.b, x...)
	case string:
		w.key(k)
		w.b = AppendJSONString(w.b, x)
	case int64:
		w.key(k)
		w.b = strconv.AppendInt(w.b, x, 10)
	case int:
		w.key(k)
		w.b = strconv.AppendInt(w.b, int64(x), 10)
	case bool:
		w.key(k)
		w.b = strconv.AppendBool(w.b, x)
	case float64:
		w.key(k)
		w.b, w.err = appendJSONFloat(w.b, x)
	case []Content:
		w.contents(k, x)
	case Usage:
		w.key(k)
		w.b, w.err = x.appendJSON(w.b)
	case *Message:
		w.key(k)
		if x == nil {
			w.b = append(w.b, "null"...)
			return
		}
		w.b, w.err = x.AppendJSON(w.b)
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			w.err = err
			return
		}
		w.key(k)
		w.b = append(w.b, bytes.TrimRight(buf.Bytes(), "\n")...)
	}
}

// contents writes key:[blocks] in place, each block as its MarshalJSON
// writes it: a message is encoded for every session line, and an
// encoder's reflection and buffers would cost more than the blocks.
func (w *objWriter) contents(k string, cs []Content) {
	w.key(k)
	w.b = append(w.b, '[')
	for i := range cs {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		start := len(w.b)
		w.b, w.err = cs[i].appendJSON(w.b)
		if w.err == nil && (len(cs[i].Arguments) > 0 || len(cs[i].Extra) > 0) {
			// Raw values: checked and compacted, as the encoder does.
			if json.Valid(w.b[start:]) {
				w.b = w.b[:start+len(CompactValid(w.b[start:]))]
			} else {
				w.err = json.Compact(new(bytes.Buffer), w.b[start:]) // says what is wrong
			}
		}
		if w.err != nil {
			w.err = fmt.Errorf("json: error calling MarshalJSON for type llm.Content: %w", w.err)
			return
		}
	}
	w.b = append(w.b, ']')
}

// CompactValid elides the insignificant spaces of the valid JSON text b in
// place, as json.Compact does, and returns the shortened b.
func CompactValid(b []byte) []byte {
	w := 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ', c == '\t', c == '\n', c == '\r':
			continue
		}
		b[w] = c
		w++
	}
	return b[:w]
}

func (w *objWriter) extra(fs []Field) {
	for _, f := range fs {
		w.val(f.Key, f.Value)
	}
}

// close ends the object and returns the bytes.
func (w *objWriter) close() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return append(w.b, '}'), nil
}

// MarshalJSONNoEscape encodes v like json.Marshal but without escaping <, >
// and & (pi writes them raw).
func MarshalJSONNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func unmarshalField(f Field, dst any) error {
	if err := json.Unmarshal(f.Value, dst); err != nil {
		return fmt.Errorf("field %q: %w", f.Key, err)
	}
	return nil
}
