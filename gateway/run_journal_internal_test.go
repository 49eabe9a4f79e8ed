package gateway

import (
	"context"
	"slices"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway/stream"
)

// journalLog is a replyWriter that keeps the entries written.
type journalLog struct{ entries [][]chat.MsgRef }

func (l *journalLog) recordReply(refs []chat.MsgRef, _ string) { l.entries = append(l.entries, refs) }
func (l *journalLog) frozen() bool                             { return false }

// TestJournalNamesAMessageThatReplacedAGoneOne: a reply's message is gone
// (deleted in the chat) and the reply continues in a new one: the journal
// names the new message, though the reply has as many messages as before.
// (The journal compared counts and kept naming the gone message: a crash
// then left the new one unknown to the restart.)
func TestJournalNamesAMessageThatReplacedAGoneOne(t *testing.T) {
	conv := chat.ConvRef{Platform: "test", Channel: "c", DM: true}
	ad := chattest.New()
	gone, err := ad.Send(t.Context(), conv, chat.Out{Markdown: "the begin▌"})
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Delete(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	var j replyJournal
	log := &journalLog{}
	var ctl *stream.Controller
	ctl = stream.New(ad, conv, stream.Options{Continue: []chat.MsgRef{gone}, OnPost: func() { j.update(ctl, log) }})
	j.update(ctl, log) // the journal names the reply's message
	ctl.SetText("the beginning and the end")
	refs, err := ctl.Finish(context.Background(), chat.Out{})
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1 || refs[0] == gone {
		t.Fatalf("reply messages %v, want one new message", refs)
	}
	if len(log.entries) == 0 || !slices.Equal(log.entries[len(log.entries)-1], refs) {
		t.Fatalf("journal %v, last entry should name %v", log.entries, refs)
	}
}
