package stream

import "time"

// item is one part of a reply: an assistant message section or a tool call.
type item struct {
	tool     *toolRun
	thinking string
	text     string
}

// toolRun is one tool call. summary and detail are already formatted for
// the reply's verbosity (toolSummary, toolDetail).
type toolRun struct {
	name, summary string
	start, end    time.Time
	done, isError bool
	detail        string // shown after the line once done
}

// document is the content of a reply, independent of any platform.
type document struct {
	items  []*item
	open   *item // the current assistant message section, nil if none
	tools  map[string]*toolRun
	status string
}

// section returns the current assistant message section, opening one.
func (d *document) section() *item {
	if d.open == nil {
		d.open = &item{}
		d.items = append(d.items, d.open)
	}
	return d.open
}

func (d *document) setText(md string) { d.section().text = md }

func (d *document) setThinking(s string) { d.section().thinking = s }

func (d *document) endMessage() { d.open = nil }

// setFinal replaces the text of the last assistant message: the open one,
// else the last part of the reply if it is a message; otherwise md becomes
// a new message after the tool lines.
func (d *document) setFinal(md string) {
	if d.open == nil && len(d.items) > 0 && d.items[len(d.items)-1].tool == nil {
		d.open = d.items[len(d.items)-1]
	}
	d.setText(md)
}

func (d *document) toolStart(id, name, summary string, now time.Time) {
	t := &toolRun{name: name, summary: summary, start: now}
	if d.tools == nil {
		d.tools = map[string]*toolRun{}
	}
	d.tools[id] = t
	d.items = append(d.items, &item{tool: t})
}

// toolEnd marks a tool finished; it reports false for an unknown id.
func (d *document) toolEnd(id string, isError bool, detail string, now time.Time) bool {
	t, ok := d.tools[id]
	if !ok || t.done {
		return false
	}
	t.done, t.isError, t.detail, t.end = true, isError, detail, now
	return true
}

// running returns a running tool, nil if none.
func (d *document) running() *toolRun {
	for _, it := range d.items {
		if it.tool != nil && !it.tool.done {
			return it.tool
		}
	}
	return nil
}
