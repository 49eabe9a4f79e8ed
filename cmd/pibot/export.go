package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/pibot/pibot/session"
)

// exportJSONL renders a header and a branch as a session file whose
// entries form one chain: each entry's parentId is the previous entry's
// id (the first is null). Entries are copied byte for byte except for a
// parentId that has to change.
func exportJSONL(h session.Header, branch []session.Entry) ([]byte, error) {
	var buf bytes.Buffer
	hb, err := h.MarshalJSON()
	if err != nil {
		return nil, err
	}
	buf.Write(hb)
	buf.WriteByte('\n')
	parent := ""
	for _, e := range branch {
		line, err := withParent(e.Raw, parent)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %w", e.ID, err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
		parent = e.ID
	}
	return buf.Bytes(), nil
}

type member struct {
	key string
	val json.RawMessage
}

// withParent returns the JSON object raw with its parentId set to parent
// ("" = null), keeping every other member and the key order.
func withParent(raw []byte, parent string) ([]byte, error) {
	want := []byte("null")
	if parent != "" {
		want, _ = json.Marshal(parent)
	}
	members, err := objectMembers(raw)
	if err != nil {
		return nil, err
	}
	found := false
	for i, m := range members {
		if m.key != "parentId" {
			continue
		}
		if bytes.Equal(bytes.TrimSpace(m.val), want) {
			return raw, nil
		}
		members[i].val, found = want, true
	}
	if !found {
		members = append(members, member{key: "parentId", val: want})
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// objectMembers splits a JSON object into its members, values kept as
// raw bytes.
func objectMembers(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("bad object key %v", tok)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("member %q: %w", key, err)
		}
		out = append(out, member{key: key, val: v})
	}
	return out, nil
}
