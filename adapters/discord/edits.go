package discord

import (
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// editLog remembers the last content and edit time of the bot's messages,
// to space edits of one message and skip edits that change nothing.
type editLog struct {
	mu   sync.Mutex
	last map[string]editMark
}

// editMark is a message's last content (hashed) and edit.
type editMark struct {
	at   time.Time
	hash string
}

// mark records a message's content; edited says it was an edit made
// now (a new message does not count against the edit spacing).
func (l *editLog) mark(id, content string, comps []discordgo.MessageComponent, edited bool) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%v", content, comps))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) > 4096 {
		cut := time.Now().Add(-time.Minute)
		for k, v := range l.last {
			if v.at.Before(cut) { // new messages (zero time) go first
				delete(l.last, k)
			}
		}
	}
	m := editMark{hash: string(sum[:])}
	if edited {
		m.at = time.Now()
	}
	l.last[id] = m
}

// gate says whether an edit of id to content may go now: an edit that
// changes nothing is skipped (nil, false); one within editInterval of the
// last is a RateLimitError.
func (l *editLog) gate(id, content string, comps []discordgo.MessageComponent) (bool, error) {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%v", content, comps))
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.last[id]
	if !ok {
		return true, nil
	}
	if last.hash == string(sum[:]) {
		return false, nil
	}
	if d := editInterval - time.Since(last.at); d > 0 {
		return false, &chat.RateLimitError{RetryAfter: d, Scope: "message"}
	}
	return true, nil
}
