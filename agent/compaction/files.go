package compaction

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/pibot/pibot/llm"
)

// FileOps collects file paths touched by tool calls: read by `read`,
// written by `write`, edited by `edit`.
type FileOps struct {
	Read    map[string]bool
	Written map[string]bool
	Edited  map[string]bool
}

func newFileOps() FileOps {
	return FileOps{Read: map[string]bool{}, Written: map[string]bool{}, Edited: map[string]bool{}}
}

func (f FileOps) addDetails(d FileDetails) {
	for _, p := range d.ReadFiles {
		f.Read[p] = true
	}
	for _, p := range d.ModifiedFiles {
		f.Edited[p] = true
	}
}

func (f FileOps) addMessage(m llm.Message) {
	if m.Role != llm.RoleAssistant {
		return
	}
	for _, c := range m.ToolCalls() {
		var args struct {
			Path any `json:"path"`
		}
		if json.Unmarshal(c.Arguments, &args) != nil {
			continue
		}
		path, ok := args.Path.(string)
		if !ok || path == "" {
			continue
		}
		switch c.Name {
		case "read":
			f.Read[path] = true
		case "write":
			f.Written[path] = true
		case "edit":
			f.Edited[path] = true
		}
	}
}

// Lists returns the sorted read-only and modified files.
func (f FileOps) Lists() FileDetails {
	mod := map[string]bool{}
	for p := range f.Edited {
		mod[p] = true
	}
	for p := range f.Written {
		mod[p] = true
	}
	d := FileDetails{ReadFiles: []string{}, ModifiedFiles: []string{}}
	for p := range f.Read {
		if !mod[p] {
			d.ReadFiles = append(d.ReadFiles, p)
		}
	}
	for p := range mod {
		d.ModifiedFiles = append(d.ModifiedFiles, p)
	}
	slices.Sort(d.ReadFiles)
	slices.Sort(d.ModifiedFiles)
	return d
}

// fileTags is the suffix pi appends to a summary.
func fileTags(d FileDetails) string {
	var sections []string
	if len(d.ReadFiles) > 0 {
		sections = append(sections, "<read-files>\n"+strings.Join(d.ReadFiles, "\n")+"\n</read-files>")
	}
	if len(d.ModifiedFiles) > 0 {
		sections = append(sections, "<modified-files>\n"+strings.Join(d.ModifiedFiles, "\n")+"\n</modified-files>")
	}
	if len(sections) == 0 {
		return ""
	}
	return "\n\n" + strings.Join(sections, "\n\n")
}
