package session

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/pibot/pibot/llm"
)

// TreeOptions select what TreeText shows.
type TreeOptions struct {
	// All shows every entry; by default only the user's turns (user
	// messages, and compactions and branch summaries, which stand for
	// turns) are shown. pibot's own bookkeeping (custom entries of type
	// "pibot.*") is hidden either way.
	All bool
}

// TreeText draws the session tree with box-drawing indentation, one line
// per shown entry: its id, what it is, its label, and marks for the heads
// ("◀ loc") and pi's default leaf ("◀ leaf"). A head or the leaf on an
// entry that is not shown is marked on the shown entry it follows (its
// turn). A chain without branches stays at one depth.
func TreeText(w io.Writer, t *Tree, opts TreeOptions) error {
	shown := func(e Entry) bool {
		if e.Type == TypeCustom && strings.HasPrefix(e.CustomType, "pibot.") {
			return false
		}
		if opts.All {
			return true
		}
		switch e.Type {
		case TypeMessage:
			return e.Message != nil && e.Message.Role == llm.RoleUser
		case TypeCompaction, TypeBranchSummary:
			return true
		}
		return false
	}
	marks := map[string][]string{}
	mark := func(id, m string) {
		if id != "" {
			marks[id] = append(marks[id], m)
		}
	}
	heads := t.Heads()
	for _, loc := range slices.Sorted(maps.Keys(heads)) {
		mark(heads[loc], "◀ "+loc)
	}
	mark(t.Leaf(), "◀ leaf")

	// Condense the tree to the shown entries, moving the marks of hidden
	// entries up to the shown entry they follow.
	type vnode struct {
		n        *Node
		marks    []string
		children []*vnode
	}
	var condense func(n *Node, up *vnode) []*vnode
	condense = func(n *Node, up *vnode) []*vnode {
		var self *vnode
		if shown(n.Entry) {
			self = &vnode{n: n}
			up = self
		}
		if up != nil {
			up.marks = append(up.marks, marks[n.Entry.ID]...)
		}
		var kids []*vnode
		for _, c := range n.Children {
			kids = append(kids, condense(c, up)...)
		}
		if self == nil {
			return kids
		}
		self.children = kids
		return []*vnode{self}
	}
	var roots []*vnode
	for _, r := range t.Roots() {
		roots = append(roots, condense(r, nil)...)
	}

	var walk func(v *vnode, prefix string, last, flat bool) error
	walk = func(v *vnode, prefix string, last, flat bool) error {
		branch, next := "├─ ", prefix+"│  "
		if last {
			branch, next = "└─ ", prefix+"   "
		}
		if flat {
			branch, next = "", prefix
		}
		line := prefix + branch + v.n.Entry.ID + " " + describe(v.n.Entry)
		if v.n.Label != "" {
			line += " [" + v.n.Label + "]"
		}
		if len(v.marks) > 0 {
			line += "  " + strings.Join(v.marks, " ")
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		for i, c := range v.children {
			if err := walk(c, next, i == len(v.children)-1, len(v.children) == 1); err != nil {
				return err
			}
		}
		return nil
	}
	for i, r := range roots {
		// Several roots (hidden entries above a fork) are drawn as
		// siblings, so a fork at the top is seen as one.
		if err := walk(r, "", i == len(roots)-1, len(roots) == 1); err != nil {
			return err
		}
	}
	return nil
}
