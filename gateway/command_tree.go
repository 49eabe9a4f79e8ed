package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// maxTreeButtons bounds the jump buttons of /tree.
const maxTreeButtons = 8

// treeWidth is how many runes of a turn /tree shows, on its line and on
// its button alike.
const treeWidth = 50

// maxTreeLines bounds the turns /tree draws.
const maxTreeLines = 60

// jump moves the location's head for a tree or fork button. In a group
// only owners may: the conversation is everyone's.
func (cs *commands) jump(ctx context.Context, in chat.Inbound, data string) string {
	if !in.Conv.DM && !cs.rights.IsOwner(in.Conv.Platform, in.User.ID) {
		return "Only an owner can move this group's conversation to another branch."
	}
	o, loc := cs.sessions.existing(ctx, in)
	if o == nil {
		return "This session is gone."
	}
	busy := o.activeRun(loc) != nil
	if busy {
		return "A run is active; /stop it first."
	}
	id := data[len(btnJump):]
	e, ok := o.tree().Get(id)
	if !ok {
		return "That entry does not exist."
	}
	fork := strings.HasPrefix(data, btnFork)
	target := id
	if fork && e.ParentID != "" {
		target = e.ParentID
	}
	if err := o.moveHead(loc, target, session.SyncAlways); err != nil {
		cs.log.Error("move head", "conv", in.Conv.Key(), "err", err)
		return "⚠️ The branch could not be changed; the details are in pibot's log."
	}
	// The turn is named as /tree shows it; it is quoted, so its own
	// closing punctuation needs none of the sentence's.
	what := "🌿 Now on the branch at “%s”: your next message continues from there."
	if fork {
		what = "🌿 Forked before “%s”: your next message continues from there."
	}
	cs.chat.reply(ctx, in, fmt.Sprintf(what, escapeMarkdown(turnTitle(o.tree(), id))))
	return "Moved."
}

// cmdFork moves the head to the message replied to, or offers buttons for
// the user messages of the branch.
func cmdFork(ctx context.Context, c *invocation) {
	o, loc := c.o, c.loc
	if c.run != nil {
		c.tell(ctx, "A run is active; /stop it first.")
		return
	}
	if c.in.ReplyTo != nil {
		target, ok := branchPoint(o.tree(), *c.in.ReplyTo)
		if !ok {
			c.tell(ctx, "I don't know that message; reply to one of this conversation's messages.")
			return
		}
		if err := o.moveHead(loc, target, session.SyncAlways); err != nil {
			c.failed(ctx, "forking", err)
			return
		}
		c.say(ctx, "🌿 Forked. Your next message continues from the message you replied to.")
		return
	}
	branch, err := o.view(loc).branch()
	if err != nil {
		c.failed(ctx, "reading the session", err)
		return
	}
	var rows [][]chat.Button
	for i := len(branch) - 1; i >= 0 && len(rows) < maxTreeButtons; i-- {
		e := branch[i]
		if isTurn(e) {
			rows = append(rows, []chat.Button{{ID: btnFork + e.ID, Label: "↩ " + turnText(e.Message)}})
		}
	}
	if len(rows) == 0 {
		c.tell(ctx, "Nothing to fork from yet.")
		return
	}
	c.sendButtons(ctx, "Fork from which message? The message you pick can then be asked again differently. (Or reply to any message with /fork.)", rows)
}

// cmdTree draws the session tree with a button per other branch.
func cmdTree(ctx context.Context, c *invocation) {
	v := renderTree(c.o.tree(), c.o.head(c.loc))
	var rows [][]chat.Button
	for _, j := range v.jumps {
		rows = append(rows, []chat.Button{{ID: btnJump + j.target, Label: j.label}})
	}
	c.sendButtons(ctx, v.text, rows)
}

// sendButtons posts md with buttons in the command's conversation.
func (c *invocation) sendButtons(ctx context.Context, md string, rows [][]chat.Button) {
	if _, err := c.cmds.chat.send(ctx, c.conv, chat.Out{Markdown: md, Buttons: rows}); err != nil {
		c.cmds.log.Warn("send", "err", err)
	}
}

// isTurn reports whether e is a user message: a line of /tree.
func isTurn(e session.Entry) bool {
	return e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser
}

// inContext reports whether e gives the model's context a message (pi's
// buildSessionContext): what a branch ends with, as far as the model is
// concerned. Bookkeeping (head moves, deliveries, labels) does not.
func inContext(e session.Entry) bool {
	switch e.Type {
	case session.TypeMessage, session.TypeCustomMessage, session.TypeBranchSummary, session.TypeCompaction:
		return true
	}
	return false
}

// turnText is how /tree shows a user message, on its line and on its
// button: the text as plain text (no markdown) on one line, at most
// treeWidth runes.
func turnText(m *llm.Message) string {
	if t := chat.Line(m.Text(), treeWidth); t != "" {
		return t
	}
	return "(no text)"
}

// turnTitle names the entry id as /tree does: the text of the turn it is
// in (the nearest user message at or above it).
func turnTitle(s *session.Tree, id string) string {
	branch, err := s.Branch(id)
	if err != nil {
		return id
	}
	for i := len(branch) - 1; i >= 0; i-- {
		if isTurn(branch[i]) {
			return turnText(branch[i].Message)
		}
	}
	return "the start"
}

// escapeMarkdown makes plain text literal in CommonMark: every ASCII
// punctuation character gets a backslash.
func escapeMarkdown(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && unicode.IsPunct(r) || r == '`' || r == '^' || r == '|' || r == '~' || r == '<' || r == '>' || r == '=' || r == '+' || r == '$' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// treeView is what /tree shows: the tree as markdown and the branches it
// offers to jump to.
type treeView struct {
	text  string
	jumps []treeJump
}

// treeJump is one jump button: the entry to move the head to, labelled
// with the line of the turn the branch ends in.
type treeJump struct {
	target, label string
}

// turnNode is a line of /tree: a user message and the turns after it.
type turnNode struct {
	e        session.Entry
	children []*turnNode
}

// branchEnd is the end of a branch: an entry of the model's context with
// none below it, the turn it is in, and the most recent leaf under it
// (the jump target: the branch with its bookkeeping, such as the
// delivery of its last answer).
type branchEnd struct {
	id, leaf string
	leafPos  int
	turn     *turnNode
}

// renderTree draws the session as a tree of its turns (user messages),
// marking the head's path (●) and the turn the head is in, and lists the
// other branches to jump to, each labelled as its last turn's line reads.
func renderTree(s *session.Tree, head string) treeView {
	pos := map[string]int{}
	for i, e := range s.Entries() {
		pos[e.ID] = i
	}
	onPath := map[string]bool{}
	here, headEnd := "", ""
	if b, err := s.Branch(head); err == nil {
		for _, e := range b {
			onPath[e.ID] = true
			if isTurn(e) {
				here = e.ID
			}
			if inContext(e) {
				headEnd = e.ID
			}
		}
	}
	// Condense the tree to turns and find the branch ends. A chain is
	// walked in a loop; only forks recurse.
	root := &turnNode{}
	var ends []*branchEnd
	// walk visits n's chain and returns whether a context entry lies in
	// it or below, and the most recent leaf there.
	var walk func(n *session.Node, up *turnNode) (bool, string, int)
	walk = func(n *session.Node, up *turnNode) (bool, string, int) {
		var chain []*session.Node
		var turns []*turnNode // the turn each entry of chain is in
		for {
			chain = append(chain, n)
			if isTurn(n.Entry) {
				t := &turnNode{e: n.Entry}
				up.children = append(up.children, t)
				up = t
			}
			turns = append(turns, up)
			if len(n.Children) != 1 {
				break
			}
			n = n.Children[0]
		}
		ctx, leaf, leafPos := false, n.Entry.ID, pos[n.Entry.ID]
		if len(n.Children) > 0 {
			leafPos = -1
		}
		for _, c := range n.Children {
			cctx, cleaf, cpos := walk(c, up)
			ctx = ctx || cctx
			if cpos > leafPos {
				leaf, leafPos = cleaf, cpos
			}
		}
		// Up the chain: the deepest context entry without one below it
		// ends a branch.
		for i := len(chain) - 1; i >= 0 && !ctx; i-- {
			if inContext(chain[i].Entry) {
				ctx = true
				ends = append(ends, &branchEnd{id: chain[i].Entry.ID, leaf: leaf, leafPos: leafPos, turn: turns[i]})
			}
		}
		return ctx, leaf, leafPos
	}
	for _, r := range s.Roots() {
		walk(r, root)
	}

	var b strings.Builder
	b.WriteString("**Session tree** (● your branch, ◀ you are here)\n\n```\n")
	lines := 0
	var draw func(t *turnNode, indent string)
	draw = func(t *turnNode, indent string) {
		for i, c := range t.children {
			if lines >= maxTreeLines {
				if i == 0 {
					b.WriteString(indent + "…\n")
				}
				return
			}
			lines++
			mark := "○"
			if onPath[c.e.ID] {
				mark = "●"
			}
			branchMark, next := "├ ", indent+"│ "
			if i == len(t.children)-1 {
				branchMark, next = "└ ", indent+"  "
			}
			if len(t.children) == 1 {
				branchMark, next = "", indent
			}
			line := indent + branchMark + mark + " " + turnText(c.e.Message)
			if c.e.ID == here {
				line += "  ◀ you are here"
			}
			b.WriteString(line + "\n")
			draw(c, next)
		}
	}
	draw(root, "")
	b.WriteString("```")

	// The other branches, the most recent ones when there are many, in
	// the order the tree draws them.
	var others []*branchEnd
	for _, e := range ends {
		if e.id != headEnd {
			others = append(others, e)
		}
	}
	if len(others) > maxTreeButtons {
		recent := slices.Clone(others)
		slices.SortFunc(recent, func(a, b *branchEnd) int { return b.leafPos - a.leafPos })
		keep := map[*branchEnd]bool{}
		for _, e := range recent[:maxTreeButtons] {
			keep[e] = true
		}
		others = slices.DeleteFunc(others, func(e *branchEnd) bool { return !keep[e] })
	}
	v := treeView{}
	seen := map[string]int{}
	for _, e := range others {
		label := "the start"
		if e.turn != nil && e.turn != root {
			label = turnText(e.turn.e.Message)
		}
		// Two branches ending in turns that read alike are told apart.
		if seen[label]++; seen[label] > 1 {
			label = fmt.Sprintf("%s (%d)", label, seen[label])
		}
		v.jumps = append(v.jumps, treeJump{target: e.leaf, label: label})
	}
	if len(v.jumps) > 0 {
		b.WriteString("\nJump to another branch:")
	}
	v.text = b.String()
	return v
}
