package tools

import (
	"encoding/json"
)

// Touch is one path a tool call would touch.
type Touch struct {
	// Path is absolute and cleaned, resolved the way the tool resolves it.
	Path string
	// Inside reports whether Path stays inside the workspace, symlinks of
	// its existing prefix followed.
	Inside bool
	// Write is true when the call would change the file.
	Write bool
}

// Paths returns the paths a call of tool with args would touch, resolved
// like the tool resolves them: a leading "@" dropped, "~" the home
// directory, relative paths against the workspace, grep, find and ls
// defaulting to the workspace itself. It ignores confinement, so a caller
// can ask about a path before the tool would refuse it. bash and tools it
// does not know touch no known path (nil). Arguments the tool could not
// read either are an error.
func (w *Workspace) Paths(tool string, args json.RawMessage) ([]Touch, error) {
	var p string
	write := false
	switch tool {
	case "read", "write", "attach":
		var a struct {
			Path *string `json:"path"`
		}
		if err := decodeArgs(tool, args, &a); err != nil {
			return nil, err
		}
		if a.Path == nil {
			return nil, missing(tool, "path")
		}
		p, write = *a.Path, tool == "write"
	case "edit":
		path, _, err := parseEditArgs(args)
		if err != nil {
			return nil, err
		}
		p, write = path, true
	case "grep", "find", "ls":
		var a struct {
			Path *string `json:"path"`
		}
		if err := decodeArgs(tool, args, &a); err != nil {
			return nil, err
		}
		p = "."
		if a.Path != nil && *a.Path != "" {
			p = *a.Path
		}
	default:
		return nil, nil
	}
	abs := w.absolute(p)
	return []Touch{{Path: abs, Inside: w.Inside(abs), Write: write}}, nil
}
