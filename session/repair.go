package session

import (
	"fmt"
	"io"
	"strings"
)

// Repair opens path for writing, which repairs it (torn tail truncated
// with a .broken copy, final newline, migration, pibot.repair entry), and
// returns the report. With dryRun nothing is written: the report says what
// a repair would do.
func Repair(path string, dryRun bool) (Report, error) {
	s, err := OpenFile(path, Options{ReadOnly: dryRun})
	if err != nil {
		return Report{}, err
	}
	rep := s.Report()
	return rep, s.Close()
}

// TreeText prints the session tree, one entry per line, with box-drawing
// indentation, the entry type, a short summary, labels and heads.
func TreeText(w io.Writer, s *Session) error {
	heads := map[string][]string{}
	for loc, id := range s.Heads() {
		heads[id] = append(heads[id], loc)
	}
	leaf := s.Leaf()
	var walk func(n *Node, prefix string, last, root bool) error
	walk = func(n *Node, prefix string, last, root bool) error {
		branch, next := "├─ ", prefix+"│  "
		if last {
			branch, next = "└─ ", prefix+"   "
		}
		if root {
			branch, next = "", prefix
		}
		line := prefix + branch + n.Entry.ID + " " + describe(n.Entry)
		if n.Label != "" {
			line += " [" + n.Label + "]"
		}
		for _, loc := range heads[n.Entry.ID] {
			line += " <" + loc + ">"
		}
		if n.Entry.ID == leaf {
			line += " *"
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		// Single children continue at the same depth to keep chains flat.
		for i, c := range n.Children {
			if len(n.Children) == 1 {
				if err := walk(c, prefix, true, true); err != nil {
					return err
				}
				continue
			}
			if err := walk(c, next, i == len(n.Children)-1, false); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range s.Tree() {
		if err := walk(r, "", true, true); err != nil {
			return err
		}
	}
	return nil
}

func describe(e Entry) string {
	short := func(s string) string {
		s = strings.Join(strings.Fields(s), " ")
		if r := []rune(s); len(r) > 60 {
			return string(r[:60]) + "…"
		}
		return s
	}
	switch e.Type {
	case TypeMessage:
		if e.Message == nil {
			return "message"
		}
		return string(e.Message.Role) + ": " + short(e.Message.Text()+e.Message.Command+e.Message.Summary)
	case TypeModelChange:
		return "model: " + e.Provider + "/" + e.ModelID
	case TypeThinkingLevelChange:
		return "thinking: " + e.ThinkingLevel
	case TypeCompaction, TypeBranchSummary:
		return e.Type + ": " + short(e.Summary)
	case TypeCustom, TypeCustomMessage:
		return e.Type + ": " + e.CustomType
	case TypeLabel:
		l := "(cleared)"
		if e.Label != nil {
			l = *e.Label
		}
		return "label " + e.TargetID + ": " + l
	case TypeSessionInfo:
		if e.Name != nil {
			return "name: " + *e.Name
		}
		return "name cleared"
	}
	return e.Type
}
