package stream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/chattest"
	"github.com/pibot/pibot/gateway/stream"
)

// TestContinueFinishesTheMessagesOfAnEarlierReply: a reply that takes
// over the messages of one posted earlier edits them to show it, posts
// what they cannot hold and removes what it no longer needs; OnPost
// reports every new message, none of the taken-over ones.
func TestContinueFinishesTheMessagesOfAnEarlierReply(t *testing.T) {
	long := strings.Join(words(120), "") // three or four messages of 200
	for _, tc := range []struct {
		name   string
		posted []string // what the earlier reply shows
		text   string
	}{
		{"same text", []string{"the answer"}, "the answer"},
		{"cut short", []string{"the ans▌"}, "the answer"},
		{"more messages", []string{"word0 word1▌"}, long},
		{"fewer messages", []string{"a", "b", "c"}, "the answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ad := newAdapter(caps(200))
			var refs []chat.MsgRef
			for _, p := range tc.posted {
				ref, err := ad.Send(t.Context(), dm, chat.Out{Markdown: p})
				if err != nil {
					t.Fatal(err)
				}
				refs = append(refs, ref)
			}
			var posts atomic.Int32
			c := stream.New(ad, dm, stream.Options{Continue: refs, OnPost: func() { posts.Add(1) }})
			c.SetText(tc.text)
			got, err := c.Finish(context.Background(), chat.Out{})
			if err != nil {
				t.Fatal(err)
			}
			msgs := ad.Messages(dm)
			if j := strings.Join(strings.Fields(strings.Join(msgs, " ")), " "); j != strings.Join(strings.Fields(tc.text), " ") {
				t.Fatalf("chat shows %q, want %q", msgs, tc.text)
			}
			if len(got) != len(msgs) || got[0] != refs[0] {
				t.Fatalf("refs %v for messages %q (taken over %v)", got, msgs, refs)
			}
			sends := len(chattest.Filter(ad.Calls(), chattest.MethodSend)) - len(tc.posted)
			if sends != max(0, len(msgs)-len(tc.posted)) || int(posts.Load()) != sends {
				t.Fatalf("%d sends, %d reported, for %d messages over %d taken over", sends, posts.Load(), len(msgs), len(tc.posted))
			}
		})
	}
}
