package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// What the crash-point suite reads to judge a world: the documented
// window's post, and the inbox file.

// window returns the text (as it shows now) of the one message of chat
// the documented window allows to hold an answer twice: the newest bot
// message of chat when pibot died, if no reply journal or delivery record
// in the session files as the crash left them names it (the platform took
// the post an instant before the crash, before pibot noted it, so the
// restart cannot know it and posts that part again). "" if there is none.
func (c *cpCrash) window(w *cpWorld, chat int64) string {
	m, ok := c.newest[chat]
	if !ok {
		return ""
	}
	for _, content := range c.files {
		if journaled(content, chat, m.ID) {
			return ""
		}
	}
	for _, now := range w.srv.Messages(chat) {
		if now.ID == m.ID {
			return now.Text
		}
	}
	return ""
}

// journaled reports whether a pibot.reply or pibot.delivery entry of the
// session file content names message id of chat.
func journaled(content string, chat int64, id int) bool {
	ch, n := strconv.FormatInt(chat, 10), strconv.Itoa(id)
	for line := range strings.SplitSeq(content, "\n") {
		var e struct {
			CustomType string `json:"customType"`
			Data       struct {
				Refs []json.RawMessage `json:"refs"`
			} `json:"data"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || (e.CustomType != "pibot.reply" && e.CustomType != "pibot.delivery") {
			continue
		}
		for _, r := range e.Data.Refs {
			var ref struct {
				Conv struct{ Channel string }
				ID   string
			}
			var key string
			switch {
			case json.Unmarshal(r, &ref) == nil && ref.Conv.Channel == ch && ref.ID == n:
				return true
			case json.Unmarshal(r, &key) == nil && key == "telegram::"+ch+"#"+n:
				return true
			}
		}
	}
	return false
}

// cpInboxPending counts the inbox items not acknowledged nor set aside,
// reading inbox.jsonl without opening the inbox.
func cpInboxPending(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "inbox.jsonl"))
	if err != nil {
		return 1 // not written yet
	}
	pending := map[string]bool{}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		op, id := inboxOp(line)
		switch op {
		case "add", "keep":
			pending[id] = true
		case "ack", "quarantine":
			delete(pending, id)
		}
	}
	return len(pending)
}

// cpQuarantined counts the items the inbox file says were set aside.
func cpQuarantined(data string) int {
	b, _ := os.ReadFile(filepath.Join(data, "inbox.jsonl"))
	n := 0
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if op, _ := inboxOp(line); op == "quarantine" || op == "held" {
			n++
		}
	}
	return n
}

// cpCompactCarried counts the items a compaction carried over (keep and
// held records) in inbox.jsonl and the compaction's temporary files: in
// the file a compaction of the first process is writing or wrote (its
// inbox started empty: the compaction at its start carried none).
func cpCompactCarried(data string) int {
	p := filepath.Join(data, "inbox.jsonl")
	tmps, _ := filepath.Glob(filepath.Join(data, ".inbox.jsonl.tmp*"))
	n := 0
	for _, f := range append(tmps, p) {
		b, _ := os.ReadFile(f)
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			if op, _ := inboxOp(line); op == "keep" || op == "held" {
				n++
			}
		}
	}
	return n
}

// inboxOp reads the op and id of one line of inbox.jsonl.
func inboxOp(line []byte) (op, id string) {
	var rec struct{ Op, ID string }
	if json.Unmarshal(line, &rec) != nil {
		return "", ""
	}
	return rec.Op, rec.ID
}
