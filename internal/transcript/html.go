package transcript

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// style is the page's whole style sheet: the page needs no other file and
// no script (branches and tool calls fold with <details>).
const style = `body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
.e{margin:.6rem 0;padding:.4rem .7rem;border-left:3px solid #ccc}
.user{border-color:#3b82f6;background:#eff6ff}.assistant{border-color:#10b981}
.tool{border-color:#f59e0b}.fail{border-color:#ef4444;background:#fef2f2}.note{color:#666;font-size:.9em;border:0}
.who{font-weight:600;font-size:.85em;color:#555}.mark{background:#fde68a;border-radius:3px;padding:0 .3rem;font-size:.8em;margin-left:.4rem}
details.branch{margin:.8rem 0 .8rem .6rem;padding-left:.8rem;border-left:2px dashed #999}
details.branch>summary{cursor:pointer;font-weight:600;color:#444}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5rem;border-radius:4px;margin:.3rem 0}
summary{cursor:pointer}.text{white-space:pre-wrap}`

// HTML writes the whole session tree as one self-contained HTML page: the
// entries of each chain in order, every fork's branches as collapsible
// sections, tool calls and their outputs folded, heads and the default
// leaf marked.
func HTML(w io.Writer, s *session.Tree) error {
	bw := bufio.NewWriter(w)
	h := s.Header()
	t := html.EscapeString(title(s))
	fmt.Fprintf(bw, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>%s</title>\n<style>%s</style></head><body>\n", t, style)
	fmt.Fprintf(bw, "<h1>%s</h1>\n<p class=\"note\">Session <code>%s</code>, started %s</p>\n", t, html.EscapeString(h.ID), html.EscapeString(h.Timestamp))
	marks := map[string][]string{}
	heads := s.Heads()
	for _, loc := range slices.Sorted(maps.Keys(heads)) {
		marks[heads[loc]] = append(marks[heads[loc]], loc)
	}
	marks[s.Leaf()] = append(marks[s.Leaf()], "leaf")
	p := &page{w: bw, marks: marks}
	p.nodes(s.Roots())
	bw.WriteString("</body></html>\n")
	return bw.Flush()
}

// page writes the HTML of a session tree.
type page struct {
	w     *bufio.Writer
	marks map[string][]string
}

// nodes writes sibling subtrees: one inline, several as branches.
func (p *page) nodes(ns []*session.Node) {
	if len(ns) == 1 {
		p.chain(ns[0])
		return
	}
	for i, n := range ns {
		fmt.Fprintf(p.w, "<details class=\"branch\" open><summary>Branch %d of %d: %s</summary>\n", i+1, len(ns), html.EscapeString(branchTitle(n)))
		p.chain(n)
		p.w.WriteString("</details>\n")
	}
}

// chain writes n and its single-child descendants, then the fork below.
func (p *page) chain(n *session.Node) {
	for {
		p.entry(n)
		if len(n.Children) != 1 {
			if len(n.Children) > 1 {
				p.nodes(n.Children)
			}
			return
		}
		n = n.Children[0]
	}
}

// branchTitle is the first user message in n's subtree, along the first
// children.
func branchTitle(n *session.Node) string {
	for ; n != nil; n = first(n.Children) {
		if m := n.Entry.Message; n.Entry.Type == session.TypeMessage && m != nil && m.Role == llm.RoleUser {
			return oneLine(m.Text(), 60)
		}
	}
	return "(no message)"
}

func first(ns []*session.Node) *session.Node {
	if len(ns) == 0 {
		return nil
	}
	return ns[0]
}

// entry writes one entry.
func (p *page) entry(n *session.Node) {
	e := n.Entry
	var marks strings.Builder
	for _, m := range p.marks[e.ID] {
		fmt.Fprintf(&marks, "<span class=\"mark\">◀ %s</span>", html.EscapeString(m))
	}
	if n.Label != "" {
		fmt.Fprintf(&marks, "<span class=\"mark\">%s</span>", html.EscapeString(n.Label))
	}
	id := html.EscapeString(e.ID)
	switch e.Type {
	case session.TypeMessage, session.TypeCustomMessage:
		if e.Message != nil {
			p.message(id, *e.Message, marks.String())
		}
	case session.TypeCompaction, session.TypeBranchSummary:
		fmt.Fprintf(p.w, "<div class=\"e note\" id=\"%s\"><details><summary>Summary (%s)%s</summary><div class=\"text\">%s</div></details></div>\n",
			id, e.Type, marks.String(), html.EscapeString(e.Summary))
	case session.TypeModelChange:
		fmt.Fprintf(p.w, "<div class=\"e note\" id=\"%s\">model %s/%s%s</div>\n", id, html.EscapeString(e.Provider), html.EscapeString(e.ModelID), marks.String())
	case session.TypeCustom:
		if marks.Len() > 0 && !strings.HasPrefix(e.CustomType, "pibot.") {
			fmt.Fprintf(p.w, "<div class=\"e note\" id=\"%s\">%s%s</div>\n", id, html.EscapeString(e.CustomType), marks.String())
		} else if marks.Len() > 0 {
			fmt.Fprintf(p.w, "<div class=\"e note\" id=\"%s\">%s</div>\n", id, marks.String())
		}
	}
}

// message writes one message.
func (p *page) message(id string, m llm.Message, marks string) {
	esc := html.EscapeString
	switch m.Role {
	case llm.RoleUser:
		fmt.Fprintf(p.w, "<div class=\"e user\" id=\"%s\"><div class=\"who\">You%s</div><div class=\"text\">%s</div></div>\n", id, marks, esc(m.Text()))
	case llm.RoleAssistant:
		fmt.Fprintf(p.w, "<div class=\"e assistant\" id=\"%s\"><div class=\"who\">Assistant%s</div>\n", id, marks)
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				fmt.Fprintf(p.w, "<div class=\"text\">%s</div>\n", esc(c.Text))
			case llm.ContentThinking:
				if !c.Redacted && strings.TrimSpace(c.Thinking) != "" {
					fmt.Fprintf(p.w, "<details><summary>Thinking</summary><div class=\"text\">%s</div></details>\n", esc(c.Thinking))
				}
			case llm.ContentToolCall:
				fmt.Fprintf(p.w, "<details class=\"call\"><summary>🔧 %s <code>%s</code></summary><pre>%s</pre></details>\n",
					esc(c.Name), esc(oneLine(string(c.Arguments), 80)), esc(string(c.Arguments)))
			}
		}
		if m.ErrorMessage != "" {
			fmt.Fprintf(p.w, "<div class=\"fail\">%s</div>\n", esc(m.ErrorMessage))
		}
		p.w.WriteString("</div>\n")
	case llm.RoleToolResult:
		class, what := "tool", "output"
		if m.IsError {
			class, what = "tool fail", "failed"
		}
		fmt.Fprintf(p.w, "<div class=\"e %s\" id=\"%s\"><details><summary>%s %s%s</summary><pre>%s</pre></details></div>\n",
			class, id, esc(m.ToolName), what, marks, esc(m.Text()))
	case llm.RoleBashExecution:
		fmt.Fprintf(p.w, "<div class=\"e tool\" id=\"%s\"><details><summary>$ %s%s</summary><pre>%s</pre></details></div>\n",
			id, esc(m.Command), marks, esc(m.Output))
	case llm.RoleCustom:
		if m.Display {
			fmt.Fprintf(p.w, "<div class=\"e note\" id=\"%s\">%s%s</div>\n", id, esc(m.Text()), marks)
		}
	case llm.RoleCompactionSummary, llm.RoleBranchSummary:
		fmt.Fprintf(p.w, "<div class=\"e note\" id=\"%s\"><details><summary>Summary%s</summary><div class=\"text\">%s</div></details></div>\n", id, marks, esc(m.Summary))
	}
}
