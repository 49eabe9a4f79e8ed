package session

import (
	"bytes"
	"encoding/json"

	"github.com/pibot/pibot/llm"
)

func fieldOf(k string, v []byte) llm.Field {
	return llm.Field{Key: k, Value: append(json.RawMessage(nil), v...)}
}

// rewriteObject returns raw with the members in set replaced in place (or
// appended, in order, when absent) and the members in drop removed. Other
// members are copied byte for byte.
func rewriteObject(raw []byte, set []llm.Field, drop map[string]bool) []byte {
	used := make([]bool, len(set))
	var out bytes.Buffer
	out.WriteByte('{')
	first := true
	write := func(k []byte, v []byte) {
		if !first {
			out.WriteByte(',')
		}
		first = false
		out.Write(k)
		out.WriteByte(':')
		out.Write(v)
	}
	_, err := scanObject(raw, 0, func(depth int, m member) bool {
		if depth != 0 {
			return false
		}
		k := m.keyString()
		if drop[k] {
			return false
		}
		for i, f := range set {
			if f.Key == k && !used[i] {
				used[i] = true
				write(quoteKey(k), f.Value)
				return false
			}
		}
		write(raw[m.ks:m.ke], raw[m.start:m.end])
		return false
	})
	if err != nil {
		return raw
	}
	for i, f := range set {
		if !used[i] {
			write(quoteKey(f.Key), f.Value)
		}
	}
	out.WriteByte('}')
	return out.Bytes()
}

// migrate brings a v1/v2 file to v3 the way pi does, in memory: v1 entries
// get fresh ids chained in file order and compaction indexes become ids; v2
// hookMessage roles become custom. Rewritten keys keep pi's placement
// (existing keys in place, new ones appended).
func migrate(p *parsed) {
	if p.header.Version < 2 {
		ids := map[string]bool{}
		prev := ""
		for i, n := range p.nodes {
			id := newEntryID(func(s string) bool { return ids[s] })
			ids[id] = true
			set := []llm.Field{{Key: "id", Value: jsonString(id)}, {Key: "parentId", Value: jsonStringOrNull(prev)}}
			drop := map[string]bool{}
			if n.typ == TypeCompaction && n.hasFKIndex {
				drop["firstKeptEntryIndex"] = true
				// The index counts the header as entry 0. Like pi, a
				// forward reference finds no id yet and is dropped.
				if k := n.fkIndex - 1; k >= 0 && k <= int64(i) {
					target := p.nodes[k].id
					if k == int64(i) {
						target = id
					}
					set = append(set, llm.Field{Key: "firstKeptEntryId", Value: jsonString(target)})
				}
			}
			n.raw = rewriteObject(n.raw, set, drop)
			n.id, n.parentID = id, prev
			prev = id
		}
	}
	for _, n := range p.nodes {
		n.rescan() // spans moved if the v1 step rewrote the line
		if n.typ == TypeMessage && n.role == "hookMessage" {
			msg := rewriteObject(n.raw[n.msg[0]:n.msg[1]], []llm.Field{{Key: "role", Value: jsonString("custom")}}, nil)
			n.raw = rewriteObject(n.raw, []llm.Field{{Key: "message", Value: msg}}, nil)
			n.rescan()
		}
	}
	v, _ := json.Marshal(CurrentVersion)
	p.headerRaw = rewriteObject(p.headerRaw, []llm.Field{{Key: "version", Value: v}}, nil)
	p.header.Version = CurrentVersion
	p.migrated = true
}

func jsonString(s string) json.RawMessage {
	b, _ := marshalNoEscape(s)
	return b
}

func jsonStringOrNull(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	return jsonString(s)
}

// rescan refreshes the message span and fields after raw was rewritten.
func (n *node) rescan() {
	if fresh, err := scanLine(n.raw); err == nil {
		n.msg, n.role, n.provider, n.model = fresh.msg, fresh.role, fresh.provider, fresh.model
		if n.typ != TypeMessage {
			n.role, n.provider, n.model = "", "", ""
		}
	}
}
