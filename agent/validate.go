package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pibot/pibot/llm"
)

// validateArgs checks args against a JSON schema the way pi-ai does (AJV
// with allErrors and primitive coercion). It returns the coerced arguments,
// or an error whose text is pi's "Validation failed for tool ..." message.
// Supported keywords: type, properties, required, additionalProperties,
// items, enum, const, minimum, maximum, minLength, maxLength, minItems,
// maxItems, anyOf.
func validateArgs(toolName string, schema, args json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return args, nil
	}
	var sch map[string]any
	if err := json.Unmarshal(schema, &sch); err != nil {
		return nil, fmt.Errorf("tool %q: invalid parameter schema: %w", toolName, err)
	}
	raw := args
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	root, err := parseNode(raw)
	if err != nil {
		return nil, &argError{fmt.Sprintf("Validation failed for tool %q:\n  - root: invalid JSON: %v\n\nReceived arguments:\n%s", toolName, err, string(raw))}
	}
	v := &validator{}
	v.check(root, sch, "")
	if len(v.errs) == 0 {
		return root.marshal(), nil
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "  "); err != nil {
		pretty.Reset()
		pretty.Write(raw)
	}
	return nil, &argError{fmt.Sprintf("Validation failed for tool %q:\n%s\n\nReceived arguments:\n%s", toolName, strings.Join(v.errs, "\n"), pretty.String())}
}

// argError is a validation failure; its text is pi's, shown to the model.
type argError struct{ text string }

func (e *argError) Error() string { return e.text }

type validator struct{ errs []string }

func (v *validator) fail(path, msg string) {
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		path = "root"
	}
	v.errs = append(v.errs, "  - "+path+": "+msg)
}

func (v *validator) check(n *node, sch map[string]any, path string) {
	if alts, ok := sch["anyOf"].([]any); ok {
		matched := false
		for _, a := range alts {
			as, _ := a.(map[string]any)
			sub := &validator{}
			cp := n.clone()
			sub.check(cp, as, path)
			if len(sub.errs) == 0 {
				*n = *cp
				matched = true
				break
			}
		}
		if !matched {
			v.fail(path, "must match a schema in anyOf")
		}
	}
	if t, ok := sch["type"].(string); ok {
		if !n.is(t) && !n.coerce(t) {
			v.fail(path, "must be "+t)
			return
		}
	}
	if c, ok := sch["const"]; ok && !n.equals(c) {
		v.fail(path, "must be equal to constant")
	}
	if e, ok := sch["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if n.equals(x) {
				found = true
				break
			}
		}
		if !found {
			v.fail(path, "must be equal to one of the allowed values")
		}
	}
	switch n.kind {
	case kindNumber:
		f, _ := strconv.ParseFloat(string(n.raw), 64)
		if m, ok := num(sch["maximum"]); ok && f > m {
			v.fail(path, "must be <= "+fmtNum(m))
		}
		if m, ok := num(sch["minimum"]); ok && f < m {
			v.fail(path, "must be >= "+fmtNum(m))
		}
	case kindString:
		var s string
		_ = json.Unmarshal(n.raw, &s)
		l := float64(len([]rune(s)))
		if m, ok := num(sch["maxLength"]); ok && l > m {
			v.fail(path, "must NOT have more than "+fmtNum(m)+" characters")
		}
		if m, ok := num(sch["minLength"]); ok && l < m {
			v.fail(path, "must NOT have fewer than "+fmtNum(m)+" characters")
		}
	case kindArray:
		l := float64(len(n.items))
		if m, ok := num(sch["maxItems"]); ok && l > m {
			v.fail(path, "must NOT have more than "+fmtNum(m)+" items")
		}
		if m, ok := num(sch["minItems"]); ok && l < m {
			v.fail(path, "must NOT have fewer than "+fmtNum(m)+" items")
		}
		if is, ok := sch["items"].(map[string]any); ok {
			for i, it := range n.items {
				v.check(it, is, path+"/"+strconv.Itoa(i))
			}
		}
	case kindObject:
		v.checkObject(n, sch, path)
	}
}

func (v *validator) checkObject(n *node, sch map[string]any, path string) {
	props, _ := sch["properties"].(map[string]any)
	if req, ok := sch["required"].([]any); ok {
		for _, r := range req {
			name, _ := r.(string)
			if n.get(name) == nil {
				p := path
				if p == "" {
					p = name
				}
				v.fail(p, "must have required property '"+name+"'")
			}
		}
	}
	if ap, ok := sch["additionalProperties"].(bool); ok && !ap {
		for _, k := range n.keys {
			if _, known := props[k]; !known {
				v.fail(path, "must NOT have additional properties")
			}
		}
	}
	for i, k := range n.keys {
		ps, ok := props[k].(map[string]any)
		if !ok {
			if aps, ok := sch["additionalProperties"].(map[string]any); ok {
				v.check(n.vals[i], aps, path+"/"+k)
			}
			continue
		}
		v.check(n.vals[i], ps, path+"/"+k)
	}
}

func num(v any) (float64, bool) {
	f, ok := v.(float64)
	return f, ok
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// node kinds.
const (
	kindNull byte = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is a decoded JSON value that keeps object key order, so coerced
// arguments are written back in the order the model sent them.
type node struct {
	kind  byte
	raw   json.RawMessage // scalars
	keys  []string        // objects
	vals  []*node         // objects
	items []*node         // arrays
}

func parseNode(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := decodeNode(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return n, nil
}

func decodeNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			n := &node{kind: kindArray}
			for dec.More() {
				it, err := decodeNode(dec)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, it)
			}
			_, err := dec.Token()
			return n, err
		}
		n := &node{kind: kindObject}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			val, err := decodeNode(dec)
			if err != nil {
				return nil, err
			}
			n.keys = append(n.keys, k)
			n.vals = append(n.vals, val)
		}
		_, err := dec.Token()
		return n, err
	case nil:
		return &node{kind: kindNull, raw: json.RawMessage("null")}, nil
	case bool:
		return &node{kind: kindBool, raw: json.RawMessage(strconv.FormatBool(t))}, nil
	case json.Number:
		return &node{kind: kindNumber, raw: json.RawMessage(t.String())}, nil
	case string:
		b, _ := llm.MarshalJSONNoEscape(t)
		return &node{kind: kindString, raw: b}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func (n *node) clone() *node {
	c := *n
	c.keys = append([]string(nil), n.keys...)
	c.vals = make([]*node, len(n.vals))
	for i, x := range n.vals {
		c.vals[i] = x.clone()
	}
	c.items = make([]*node, len(n.items))
	for i, x := range n.items {
		c.items[i] = x.clone()
	}
	return &c
}

func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

func (n *node) is(t string) bool {
	switch t {
	case "object":
		return n.kind == kindObject
	case "array":
		return n.kind == kindArray
	case "string":
		return n.kind == kindString
	case "boolean":
		return n.kind == kindBool
	case "null":
		return n.kind == kindNull
	case "number":
		return n.kind == kindNumber
	case "integer":
		if n.kind != kindNumber {
			return false
		}
		f, err := strconv.ParseFloat(string(n.raw), 64)
		return err == nil && f == math.Trunc(f)
	}
	return true
}

// coerce converts a scalar to type t like AJV's coerceTypes, reporting
// whether it succeeded.
func (n *node) coerce(t string) bool {
	var s string
	if n.kind == kindString {
		_ = json.Unmarshal(n.raw, &s)
	}
	set := func(kind byte, raw string) bool {
		n.kind, n.raw = kind, json.RawMessage(raw)
		return true
	}
	switch t {
	case "number", "integer":
		switch n.kind {
		case kindString:
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || s == "" || math.IsInf(f, 0) || math.IsNaN(f) || (t == "integer" && f != math.Trunc(f)) {
				return false
			}
			return set(kindNumber, fmtNum(f))
		case kindBool:
			if string(n.raw) == "true" {
				return set(kindNumber, "1")
			}
			return set(kindNumber, "0")
		case kindNull:
			return set(kindNumber, "0")
		}
	case "string":
		switch n.kind {
		case kindNumber, kindBool:
			b, _ := llm.MarshalJSONNoEscape(string(n.raw))
			return set(kindString, string(b))
		case kindNull:
			return set(kindString, `""`)
		}
	case "boolean":
		switch {
		case n.kind == kindString && s == "true", n.kind == kindNumber && string(n.raw) == "1":
			return set(kindBool, "true")
		case n.kind == kindString && s == "false", n.kind == kindNumber && string(n.raw) == "0", n.kind == kindNull:
			return set(kindBool, "false")
		}
	case "null":
		if (n.kind == kindString && s == "") || (n.kind == kindNumber && string(n.raw) == "0") || (n.kind == kindBool && string(n.raw) == "false") {
			return set(kindNull, "null")
		}
	}
	return false
}

func (n *node) equals(x any) bool {
	want, err := json.Marshal(x)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(n.marshal(), &a) != nil || json.Unmarshal(want, &b) != nil {
		return false
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return bytes.Equal(ab, bb)
}

func (n *node) marshal() json.RawMessage {
	var buf bytes.Buffer
	n.write(&buf)
	return buf.Bytes()
}

func (n *node) write(buf *bytes.Buffer) {
	switch n.kind {
	case kindArray:
		buf.WriteByte('[')
		for i, it := range n.items {
			if i > 0 {
				buf.WriteByte(',')
			}
			it.write(buf)
		}
		buf.WriteByte(']')
	case kindObject:
		buf.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, _ := llm.MarshalJSONNoEscape(k)
			buf.Write(kb)
			buf.WriteByte(':')
			n.vals[i].write(buf)
		}
		buf.WriteByte('}')
	default:
		buf.Write(n.raw)
	}
}
