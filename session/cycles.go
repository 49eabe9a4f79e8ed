package session

import (
	"encoding/json"
	"slices"
)

// breakCycles finds parent links that loop: an entry that is its own
// parent, or a chain of parents that comes back to where it started. pi's
// context walk follows parentId until it finds none, so on such a file it
// never ends. Each loop is cut at one entry, which becomes a root (its
// parentId null), as pi's tree already shows a self-parented entry; the
// cut is reported in Report.Cycles, and a writable Open rewrites the file
// with it. Callers own nodes and r.
func breakCycles(nodes []*node, r *Report) {
	cut := func(n *node) {
		if r.Cycles == nil {
			r.Cycles = map[string]string{}
		}
		r.Cycles[n.id] = n.parentID
		if p := n.parent; p != nil {
			p.children = slices.DeleteFunc(p.children, func(c *node) bool { return c == n })
		}
		n.parent, n.parentID, n.raw = nil, "", withParent(n.raw, "")
		n.rescan() // the message moved if the parentId was longer than null
	}
	const (
		unseen = iota
		onChain
		done
	)
	state := make(map[*node]uint8, len(nodes))
	for _, n := range nodes {
		if n.parentID != "" && n.parentID == n.id {
			cut(n)
		}
	}
	var chain []*node
	for _, start := range nodes {
		chain = chain[:0]
		n := start
		for n != nil && state[n] == unseen {
			state[n] = onChain
			chain = append(chain, n)
			n = n.parent
		}
		if n != nil && state[n] == onChain {
			loop := chain[slices.Index(chain, n):]
			// A writer links only to entries already in the file, so a
			// loop has a link that points forward in file order: cut it.
			victim := loop[len(loop)-1]
			for _, m := range loop {
				if m.parent.index >= m.index {
					victim = m
					break
				}
			}
			cut(victim)
		}
		for _, m := range chain {
			state[m] = done
		}
	}
}

// withParent returns raw with its top-level parentId set to parent (null
// when ""), every other byte kept.
func withParent(raw []byte, parent string) []byte {
	start, end := -1, -1
	_, err := scanObject(raw, 0, func(depth int, m member) bool {
		if depth == 0 && m.keyString() == "parentId" {
			start, end = m.start, m.end
		}
		return false
	})
	if err != nil || start < 0 {
		return raw
	}
	v := []byte("null")
	if parent != "" {
		v, _ = json.Marshal(parent)
	}
	out := make([]byte, 0, len(raw)-(end-start)+len(v))
	out = append(out, raw[:start]...)
	out = append(out, v...)
	return append(out, raw[end:]...)
}
