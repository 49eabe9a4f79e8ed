package tools

import (
	"context"
	"encoding/json"
	"os"
	"strings"

	"github.com/pibot/pibot/llm"
)

// Read is pi's read tool: a text file with offset/limit and head
// truncation, or an image.
type Read struct {
	ws   *Workspace
	spec llm.ToolSpec
}

// NewRead returns the read tool for ws.
func NewRead(ws *Workspace) *Read { return &Read{ws: ws, spec: loadSpec("read")} }

// Spec describes the tool.
func (t *Read) Spec() llm.ToolSpec { return t.spec }

type readArgs struct {
	Path   *string  `json:"path"`
	Offset *float64 `json:"offset"`
	Limit  *float64 `json:"limit"`
}

// Execute reads the file.
func (t *Read) Execute(ctx context.Context, _ string, raw json.RawMessage, _ func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a readArgs
	if err := decodeArgs("read", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if a.Path == nil {
		return llm.ToolOutput{}, missing("read", "path")
	}
	if ctx.Err() != nil {
		return llm.ToolOutput{}, errAborted
	}
	acc := t.ws.call()
	abs, err := acc.resolve(*a.Path, false)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	f, err := acc.open(abs, *a.Path, os.O_RDONLY, 0, false)
	if err != nil {
		return llm.ToolOutput{}, ioError(err, "access", abs)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return llm.ToolOutput{}, nodeError(err, "access", abs)
	}
	if st.IsDir() {
		return llm.ToolOutput{}, failf("EISDIR: illegal operation on a directory, read")
	}
	data, err := readAllCtx(ctx, f)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	if mime := sniffImage(data); mime != "" {
		return readImage(data, mime), nil
	}
	return readText(decodeUTF8(data), *a.Path, a.Offset, a.Limit)
}

// readText applies offset, limit and head truncation with pi's notices.
func readText(text, path string, offset, limit *float64) (llm.ToolOutput, error) {
	all := strings.Split(text, "\n")
	start := 0
	if offset != nil && *offset != 0 {
		start = max(0, int(*offset)-1)
	}
	if start >= len(all) {
		return llm.ToolOutput{}, failf("Offset %s is beyond end of file (%d lines total)", jsNumber(*offset), len(all))
	}
	var selected string
	userLimited := -1
	if limit != nil {
		end := min(start+max(int(*limit), 0), len(all))
		end = max(end, start)
		selected = strings.Join(all[start:end], "\n")
		userLimited = end - start
	} else {
		selected = strings.Join(all[start:], "\n")
	}
	tr := truncateHead(selected, DefaultMaxLines, DefaultMaxBytes)
	startDisp := start + 1
	switch {
	case tr.FirstLineExceedsLimit:
		return textOutput(
			"[Line "+itoa(startDisp)+" is "+formatSize(len(all[start]))+", exceeds "+formatSize(DefaultMaxBytes)+
				" limit. Use bash: sed -n '"+itoa(startDisp)+"p' "+path+" | head -c "+itoa(DefaultMaxBytes)+"]",
			readDetails{Truncation: &tr}), nil
	case tr.Truncated:
		end := startDisp + tr.OutputLines - 1
		out := tr.Content
		if *tr.TruncatedBy == "lines" {
			out += "\n\n[Showing lines " + itoa(startDisp) + "-" + itoa(end) + " of " + itoa(len(all)) + ". Use offset=" + itoa(end+1) + " to continue.]"
		} else {
			out += "\n\n[Showing lines " + itoa(startDisp) + "-" + itoa(end) + " of " + itoa(len(all)) + " (" + formatSize(DefaultMaxBytes) + " limit). Use offset=" + itoa(end+1) + " to continue.]"
		}
		return textOutput(out, readDetails{Truncation: &tr}), nil
	case userLimited >= 0 && start+userLimited < len(all):
		remaining := len(all) - (start + userLimited)
		return textOutput(tr.Content+"\n\n["+itoa(remaining)+" more lines in file. Use offset="+itoa(start+userLimited+1)+" to continue.]", nil), nil
	}
	return textOutput(tr.Content, nil), nil
}

// readDetails is read's details object.
type readDetails struct {
	Truncation *Truncation `json:"truncation,omitempty"`
}
