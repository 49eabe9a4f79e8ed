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

// objWriter builds a JSON object with keys in the order they are written.
type objWriter struct {
	buf   bytes.Buffer
	first bool
	err   error
}

func newObjWriter() *objWriter {
	w := &objWriter{first: true}
	w.buf.Grow(256) // most objects fit; fewer regrowths
	w.buf.WriteByte('{')
	return w
}

func (w *objWriter) key(k string) {
	if !w.first {
		w.buf.WriteByte(',')
	}
	w.first = false
	w.quoted(k)
	w.buf.WriteByte(':')
}

// quoted writes s as a JSON string: directly when it needs no escaping
// (the common case: ids, roles, most text), else with encoding/json.
func (w *objWriter) quoted(s string) {
	if PlainJSONString(s) {
		w.buf.WriteByte('"')
		w.buf.WriteString(s)
		w.buf.WriteByte('"')
		return
	}
	b, _ := MarshalJSONNoEscape(s)
	w.buf.Write(b)
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

// val writes key:value with encoding/json semantics (no HTML escaping).
func (w *objWriter) val(k string, v any) {
	if w.err != nil {
		return
	}
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case string:
		w.key(k)
		w.quoted(x)
		return
	case int64:
		w.key(k)
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), x, 10))
		return
	case int:
		w.key(k)
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), int64(x), 10))
		return
	case bool:
		w.key(k)
		w.buf.WriteString(strconv.FormatBool(x))
		return
	case []Content:
		w.contents(k, x)
		return
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			w.err = err
			return
		}
		b = bytes.TrimRight(buf.Bytes(), "\n")
	}
	w.key(k)
	w.buf.Write(b)
}

// contents writes key:[blocks] as encoding/json does (each block's
// MarshalJSON compacted, no HTML escaping) without its encoder: a message
// is encoded for every session line, and the encoder's reflection and
// buffers cost more than the blocks.
func (w *objWriter) contents(k string, cs []Content) {
	w.key(k)
	w.buf.WriteByte('[')
	for i, c := range cs {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		b, err := c.MarshalJSON()
		if err == nil {
			err = json.Compact(&w.buf, b)
		}
		if err != nil {
			w.err = fmt.Errorf("json: error calling MarshalJSON for type llm.Content: %w", err)
			return
		}
	}
	w.buf.WriteByte(']')
}

// usage writes key:u as val does, without encoding/json when it can
// (usagejson.go).
func (w *objWriter) usage(k string, u *Usage) {
	if w.err != nil {
		return
	}
	if !u.plainJSON() {
		w.val(k, *u)
		return
	}
	w.key(k)
	w.buf.Write(u.appendJSON(w.buf.AvailableBuffer()))
}

func (w *objWriter) extra(fs []Field) {
	for _, f := range fs {
		w.val(f.Key, f.Value)
	}
}

func (w *objWriter) bytes() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), nil
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
