package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// Button id prefixes (ids stay within chat.MaxButtonID).
const (
	btnApprove = "ap:"
	btnJump    = "tj:"
	btnFork    = "fk:"
)

// maxTreeButtons bounds the jump buttons of /tree.
const maxTreeButtons = 8

// handleAction answers a button press.
func (g *Gateway) handleAction(ctx context.Context, in chat.Inbound) {
	data := in.Action.Data
	toast := "Unknown button."
	var then func()
	switch {
	case strings.HasPrefix(data, btnApprove):
		rest := strings.TrimPrefix(data, btnApprove)
		if id, d, ok := strings.Cut(rest, ":"); ok {
			toast, then = g.decide(ctx, in, id, d)
		}
	case strings.HasPrefix(data, btnJump), strings.HasPrefix(data, btnFork):
		toast = g.jump(ctx, in, data)
	}
	// Answer the press first: the platform shows a spinner until then.
	if r, ok := g.adapters[in.Conv.Platform].(chat.ActionResponder); ok {
		if err := r.Respond(ctx, in, chat.ActionReply{Toast: toast}); err != nil {
			g.log.Debug("respond to action", "err", err)
		}
	} else if toast != "" {
		g.reply(ctx, in, "_"+toast+"_")
	}
	if then != nil {
		then()
	}
}

// jump moves the location's head for a tree or fork button.
func (g *Gateway) jump(ctx context.Context, in chat.Inbound, data string) string {
	if !in.Conv.DM && !g.access.IsOwner(in.Conv.Platform, in.User.ID) {
		return "Only an owner can move this group's conversation to another branch."
	}
	o, loc := g.existing(ctx, in)
	if o == nil {
		return "This session is gone."
	}
	o.mu.Lock()
	busy := loc.run != nil
	o.mu.Unlock()
	if busy {
		return "A run is active; /stop it first."
	}
	id := data[len(btnJump):]
	e, ok := o.sess.Get(id)
	if !ok {
		return "That entry does not exist."
	}
	target := id
	if strings.HasPrefix(data, btnFork) && e.ParentID != "" {
		target = e.ParentID
	}
	if err := o.moveHead(loc, target, session.SyncAlways); err != nil {
		g.log.Error("move head", "conv", in.Conv.Key(), "err", err)
		return "⚠️ The branch could not be changed; the details are in pibot's log."
	}
	g.reply(ctx, in, fmt.Sprintf("🌿 Now on the branch at: _%s_. Your next message continues from there.", entryTitle(o.sess, id)))
	return "Moved."
}

func (g *Gateway) cmdFork(ctx context.Context, in chat.Inbound, o *owner, loc *location) {
	o.mu.Lock()
	busy := loc.run != nil
	o.mu.Unlock()
	if busy {
		g.reply(ctx, in, "A run is active; /stop it first.")
		return
	}
	if in.ReplyTo != nil {
		target, ok := o.branchPoint(*in.ReplyTo)
		if !ok {
			g.reply(ctx, in, "I don't know that message; reply to one of this conversation's messages.")
			return
		}
		if err := o.moveHead(loc, target, session.SyncAlways); err != nil {
			g.failed(ctx, in, "forking", err)
			return
		}
		g.reply(ctx, in, "🌿 Forked. Your next message continues from the message you replied to.")
		return
	}
	branch, err := o.sess.Branch(o.head(loc))
	if err != nil {
		g.failed(ctx, in, "reading the session", err)
		return
	}
	var rows [][]chat.Button
	for i := len(branch) - 1; i >= 0 && len(rows) < maxTreeButtons; i-- {
		e := branch[i]
		if e.Type == session.TypeMessage && e.Message != nil && e.Message.Role == llm.RoleUser {
			rows = append(rows, []chat.Button{{ID: btnFork + e.ID, Label: "↩ " + oneLine(e.Message.Text(), 40)}})
		}
	}
	if len(rows) == 0 {
		g.reply(ctx, in, "Nothing to fork from yet.")
		return
	}
	g.sendButtons(ctx, in, "Fork from which message? The message you pick can then be asked again differently. (Or reply to any message with /fork.)", rows)
}

func (g *Gateway) cmdTree(ctx context.Context, in chat.Inbound, o *owner, loc *location) {
	text, leaves := renderTree(o.sess, o.head(loc))
	var rows [][]chat.Button
	for _, l := range leaves {
		if len(rows) == maxTreeButtons {
			break
		}
		rows = append(rows, []chat.Button{{ID: btnJump + l, Label: "→ " + oneLine(entryTitle(o.sess, l), 40)}})
	}
	g.sendButtons(ctx, in, text, rows)
}

func (g *Gateway) sendButtons(ctx context.Context, in chat.Inbound, md string, rows [][]chat.Button) {
	a := g.adapters[in.Conv.Platform]
	if a == nil {
		return
	}
	if _, err := a.Send(ctx, in.Conv, chat.Out{Markdown: md, Buttons: rows}); err != nil {
		g.log.Warn("send", "err", err)
	}
}

// entryTitle is a short description of an entry: the nearest user message
// at or above it.
func entryTitle(s *session.Session, id string) string {
	branch, err := s.Branch(id)
	if err != nil {
		return id
	}
	for i := len(branch) - 1; i >= 0; i-- {
		if m := branch[i].Message; branch[i].Type == session.TypeMessage && m != nil {
			if t := strings.TrimSpace(m.Text()); t != "" && (m.Role == llm.RoleUser || m.Role == llm.RoleAssistant) {
				return oneLine(t, 60)
			}
		}
	}
	return id
}

// renderTree draws the session as a tree of its conversation turns (user
// messages), marking the head's path, and returns the leaf ids.
func renderTree(s *session.Session, head string) (string, []string) {
	onPath := map[string]bool{}
	if b, err := s.Branch(head); err == nil {
		for _, e := range b {
			onPath[e.ID] = true
		}
	}
	var b strings.Builder
	b.WriteString("**Session tree** (● = where you are)\n\n```\n")
	var leaves []string
	var walk func(id, indent string, depth int)
	seen := 0
	walk = func(id, indent string, depth int) {
		// Descend through non-user entries to the next user messages.
		var turns []session.Entry
		var collect func(id string)
		collect = func(id string) {
			for _, c := range s.Children(id) {
				if c.Type == session.TypeMessage && c.Message != nil && c.Message.Role == llm.RoleUser {
					turns = append(turns, c)
				} else {
					collect(c.ID)
				}
			}
			if len(s.Children(id)) == 0 && id != "" {
				leaves = append(leaves, id)
			}
		}
		collect(id)
		for i, t := range turns {
			if seen >= 60 {
				if i == 0 {
					b.WriteString(indent + "…\n")
				}
				return
			}
			seen++
			mark := "○"
			if onPath[t.ID] {
				mark = "●"
			}
			branchMark := "├ "
			next := indent + "│ "
			if i == len(turns)-1 {
				branchMark, next = "└ ", indent+"  "
			}
			if len(turns) == 1 {
				branchMark, next = "", indent
			}
			fmt.Fprintf(&b, "%s%s%s %s\n", indent, branchMark, mark, oneLine(t.Message.Text(), 50))
			walk(t.ID, next, depth+1)
		}
	}
	for _, root := range s.Tree() {
		walk(root.Entry.ID, "", 0)
		_ = root
	}
	b.WriteString("```")
	if len(leaves) > 1 {
		b.WriteString("\nJump to a branch:")
	}
	return b.String(), dedupe(leaves)
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
