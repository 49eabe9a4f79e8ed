package transcript

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// HTML writes the whole session tree as one self-contained HTML page: the
// entries of each chain in order, messages' markdown rendered, every
// fork's branches as collapsible sections named after their first message
// (as /tree names turns), tool calls and their outputs folded, the chat
// locations' heads and pi's default leaf marked by name.
//
// The page is built by html/template, and what the session says is never
// trusted: markdown goes through safeMarkdown (no raw HTML, links only to
// http, https and mailto, no image loaded), everything else is escaped.
// Its content security policy allows no script, no request and only its
// own style sheet besides.
func HTML(w io.Writer, s *session.Tree) error {
	heads := s.Heads()
	names := placeNames(s, heads)
	marks := map[string][]string{}
	for _, loc := range slices.Sorted(maps.Keys(heads)) {
		marks[heads[loc]] = append(marks[heads[loc]], names[loc])
	}
	marks[s.Leaf()] = append(marks[s.Leaf()], "pi resumes here")
	b := &pageBuilder{md: newSafeMarkdown(), marks: marks}
	h := s.Header()
	sum := sha256.Sum256([]byte(pageStyle))
	v := pageView{
		CSP:     "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'",
		Title:   title(s),
		ID:      h.ID,
		Started: h.Timestamp,
		Body:    b.nodes(s.Roots()),
	}
	bw := bufio.NewWriter(w)
	if err := pageTemplate().Execute(bw, v); err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	return bw.Flush()
}

// pageView is what the page template shows.
type pageView struct {
	CSP, Title, ID, Started string
	Body                    chainView
}

// chainView is a chain of entries, then the fork it ends in, if any.
type chainView struct {
	Entries  []entryView
	Branches []branchView
}

// branchView is one branch of a fork.
type branchView struct {
	N, Of int
	Title string
	Body  chainView
}

// entryView is one entry as the page shows it. Kind picks the template:
// "user", "assistant", "output" (a tool's or a shell command's), "summary"
// (a compaction's or another branch's), "custom" (a displayed custom
// message) or "note" (a model change, an entry marked as a head).
type entryView struct {
	ID, Kind, Class, Title, Text, Error, Label string
	Marks                                      []string
	HTML                                       template.HTML
	Parts                                      []partView
}

// partView is a part of an assistant message: "text" and "thinking"
// (markdown), or "call" (a tool call: its name and arguments).
type partView struct {
	Kind       string
	HTML       template.HTML
	Name, Line string
	Text       string
}

// pageBuilder turns a session tree into a pageView.
type pageBuilder struct {
	md    *safeMarkdown
	marks map[string][]string
}

// nodes builds sibling subtrees: one inline, several as branches.
func (b *pageBuilder) nodes(ns []*session.Node) chainView {
	if len(ns) == 1 {
		return b.chain(ns[0])
	}
	var c chainView
	for i, n := range ns {
		c.Branches = append(c.Branches, branchView{N: i + 1, Of: len(ns), Title: branchTitle(n), Body: b.chain(n)})
	}
	return c
}

// chain builds n and its single-child descendants, then the fork below.
func (b *pageBuilder) chain(n *session.Node) chainView {
	var c chainView
	for {
		if v, ok := b.entry(n); ok {
			c.Entries = append(c.Entries, v)
		}
		if len(n.Children) != 1 {
			if len(n.Children) > 1 {
				c.Branches = b.nodes(n.Children).Branches
			}
			return c
		}
		n = n.Children[0]
	}
}

// branchTitle is the first user message in n's subtree, along the first
// children, as /tree shows it.
func branchTitle(n *session.Node) string {
	for ; n != nil; n = first(n.Children) {
		if m := n.Entry.Message; n.Entry.Type == session.TypeMessage && m != nil && m.Role == llm.RoleUser {
			return turnText(m)
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

// entry builds one entry's view; false for an entry the page does not
// show (pibot's bookkeeping without a mark, a thinking level change).
func (b *pageBuilder) entry(n *session.Node) (entryView, bool) {
	e := n.Entry
	v := entryView{ID: e.ID, Marks: b.marks[e.ID], Label: n.Label}
	marked := len(v.Marks) > 0 || v.Label != ""
	switch e.Type {
	case session.TypeMessage:
		if e.Message == nil {
			return v, false
		}
		return b.message(v, *e.Message)
	case session.TypeCustomMessage:
		m, ok := customMessage(e)
		if !ok {
			return v, false
		}
		return b.message(v, m)
	case session.TypeCompaction:
		v.Kind, v.Title, v.HTML = "summary", "Summary of the conversation before", b.md.render(e.Summary)
	case session.TypeBranchSummary:
		v.Kind, v.Title, v.HTML = "summary", "Summary of another branch", b.md.render(e.Summary)
	case session.TypeModelChange:
		v.Kind, v.Title = "note", "model "+e.Provider+"/"+e.ModelID
	case session.TypeCustom:
		if !marked {
			return v, false
		}
		v.Kind = "note"
		if !strings.HasPrefix(e.CustomType, "pibot.") {
			v.Title = e.CustomType
		}
	default:
		if !marked {
			return v, false
		}
		v.Kind = "note"
	}
	return v, true
}

// message builds the view of a message entry.
func (b *pageBuilder) message(v entryView, m llm.Message) (entryView, bool) {
	switch m.Role {
	case llm.RoleUser:
		v.Kind, v.HTML = "user", b.md.render(m.Text())
	case llm.RoleAssistant:
		v.Kind, v.Error = "assistant", m.ErrorMessage
		for _, c := range m.Content {
			switch c.Type {
			case llm.ContentText:
				v.Parts = append(v.Parts, partView{Kind: "text", HTML: b.md.render(c.Text)})
			case llm.ContentThinking:
				if !c.Redacted && strings.TrimSpace(c.Thinking) != "" {
					v.Parts = append(v.Parts, partView{Kind: "thinking", HTML: b.md.render(c.Thinking)})
				}
			case llm.ContentToolCall:
				args := string(c.Arguments)
				v.Parts = append(v.Parts, partView{Kind: "call", Name: c.Name, Line: oneLine(args, 80), Text: args})
			}
		}
	case llm.RoleToolResult:
		v.Kind, v.Class, v.Title, v.Text = "output", "tool", m.ToolName+" output", m.Text()
		if m.IsError {
			v.Class, v.Title = "tool fail", m.ToolName+" failed"
		}
	case llm.RoleBashExecution:
		v.Kind, v.Class, v.Title, v.Text = "output", "tool", "$ "+m.Command, m.Output
	case llm.RoleCustom:
		if !m.Display {
			return v, false
		}
		v.Kind, v.HTML = "custom", b.md.render(m.Text())
	case llm.RoleCompactionSummary, llm.RoleBranchSummary:
		v.Kind, v.Title, v.HTML = "summary", "Summary", b.md.render(m.Summary)
	default:
		return v, false
	}
	return v, true
}

// pageStyle is the page's whole style sheet: the page needs no other file
// and no script (branches and tool calls fold with <details>).
const pageStyle = `body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
.e{margin:.6rem 0;padding:.4rem .7rem;border-left:3px solid #ccc}
.user{border-color:#3b82f6;background:#eff6ff}.assistant{border-color:#10b981}
.tool{border-color:#f59e0b}.fail{border-color:#ef4444;background:#fef2f2}.note{color:#666;font-size:.9em;border:0}
.who{font-weight:600;font-size:.85em;color:#555}.mark{background:#fde68a;border-radius:3px;padding:0 .3rem;font-size:.8em;margin-left:.4rem;font-weight:400}
details.branch{margin:.8rem 0 .8rem .6rem;padding-left:.8rem;border-left:2px dashed #999}
details.branch>summary{cursor:pointer;font-weight:600;color:#444}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5rem;border-radius:4px;margin:.3rem 0}
summary{cursor:pointer}.raw{white-space:pre-wrap}.md,summary{overflow-wrap:anywhere}
.md>:first-child{margin-top:.2rem}.md>:last-child{margin-bottom:.2rem}
.md h1,.md h2,.md h3,.md h4,.md h5,.md h6{font-size:1.05em;margin:.6rem 0 .3rem}.md h1{font-size:1.25em}.md h2{font-size:1.15em}
.md table{border-collapse:collapse;margin:.4rem 0}.md th,.md td{border:1px solid #ccc;padding:.2rem .5rem}
.md blockquote{margin:.4rem 0;padding-left:.7rem;border-left:3px solid #ccc;color:#555}
.md code{font-family:ui-monospace,monospace;font-size:.9em}`

// pageTemplate is the page. It never changes after it is parsed.
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{{.Title}}</title>
<style>` + pageStyle + `</style></head><body>
<h1>{{.Title}}</h1>
<p class="note">Session <code>{{.ID}}</code>, started {{.Started}}</p>
{{template "chain" .Body}}</body></html>
{{define "chain"}}{{range .Entries}}{{template "entry" .}}{{end}}{{range .Branches}}<details class="branch" open><summary>Branch {{.N}} of {{.Of}}: {{.Title}}</summary>
{{template "chain" .Body}}</details>
{{end}}{{end}}
{{define "marks"}}{{range .Marks}}<span class="mark">◀ {{.}}</span>{{end}}{{with .Label}}<span class="mark">{{.}}</span>{{end}}{{end}}
{{define "entry"}}{{if eq .Kind "user"}}<div class="e user" id="{{.ID}}"><div class="who">You{{template "marks" .}}</div><div class="md">{{.HTML}}</div></div>
{{else if eq .Kind "assistant"}}<div class="e assistant" id="{{.ID}}"><div class="who">Assistant{{template "marks" .}}</div>
{{range .Parts}}{{if eq .Kind "text"}}<div class="md">{{.HTML}}</div>
{{else if eq .Kind "thinking"}}<details><summary>Thinking</summary><div class="md">{{.HTML}}</div></details>
{{else}}<details class="call"><summary>🔧 {{.Name}} <code>{{.Line}}</code></summary><pre>{{.Text}}</pre></details>
{{end}}{{end}}{{with .Error}}<div class="fail">{{.}}</div>
{{end}}</div>
{{else if eq .Kind "output"}}<div class="e {{.Class}}" id="{{.ID}}"><details><summary>{{.Title}}{{template "marks" .}}</summary><pre>{{.Text}}</pre></details></div>
{{else if eq .Kind "summary"}}<div class="e note" id="{{.ID}}"><details><summary>{{.Title}}{{template "marks" .}}</summary><div class="md">{{.HTML}}</div></details></div>
{{else if eq .Kind "custom"}}<div class="e note" id="{{.ID}}"><div class="md">{{.HTML}}</div>{{template "marks" .}}</div>
{{else}}<div class="e note" id="{{.ID}}">{{.Title}}{{template "marks" .}}</div>
{{end}}{{end}}`))
})
