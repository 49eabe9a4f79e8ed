package session

import (
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
