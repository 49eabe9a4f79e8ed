package gateway

import (
	"context"
	"fmt"
	"strings"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

// maxTreeButtons bounds the jump buttons of /tree.
const maxTreeButtons = 8

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
	o.mu.Lock()
	busy := loc.run != nil
	o.mu.Unlock()
	if busy {
		return "A run is active; /stop it first."
	}
	id := data[len(btnJump):]
	e, ok := o.sess.Tree().Get(id)
	if !ok {
		return "That entry does not exist."
	}
	target := id
	if strings.HasPrefix(data, btnFork) && e.ParentID != "" {
		target = e.ParentID
	}
	if err := o.moveHead(loc, target, session.SyncAlways); err != nil {
		cs.log.Error("move head", "conv", in.Conv.Key(), "err", err)
		return "⚠️ The branch could not be changed; the details are in pibot's log."
	}
	cs.chat.reply(ctx, in, fmt.Sprintf("🌿 Now on the branch at: _%s_. Your next message continues from there.", entryTitle(o.sess.Tree(), id)))
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
		target, ok := o.branchPoint(*c.in.ReplyTo)
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
	branch, err := o.sess.Tree().Branch(o.head(loc))
	if err != nil {
		c.failed(ctx, "reading the session", err)
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
		c.tell(ctx, "Nothing to fork from yet.")
		return
	}
	c.sendButtons(ctx, "Fork from which message? The message you pick can then be asked again differently. (Or reply to any message with /fork.)", rows)
}

// cmdTree draws the session tree with a button per branch.
func cmdTree(ctx context.Context, c *invocation) {
	s := c.o.sess.Tree()
	text, leaves := renderTree(s, c.o.head(c.loc))
	var rows [][]chat.Button
	for _, l := range leaves {
		if len(rows) == maxTreeButtons {
			break
		}
		rows = append(rows, []chat.Button{{ID: btnJump + l, Label: "→ " + oneLine(entryTitle(s, l), 40)}})
	}
	c.sendButtons(ctx, text, rows)
}

// sendButtons posts md with buttons in the command's conversation.
func (c *invocation) sendButtons(ctx context.Context, md string, rows [][]chat.Button) {
	if _, err := c.cmds.chat.send(ctx, c.conv, chat.Out{Markdown: md, Buttons: rows}); err != nil {
		c.cmds.log.Warn("send", "err", err)
	}
}

// entryTitle is a short description of an entry: the nearest user message
// at or above it.
func entryTitle(s *session.Tree, id string) string {
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
func renderTree(s *session.Tree, head string) (string, []string) {
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
	for _, root := range s.Roots() {
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
