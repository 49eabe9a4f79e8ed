package stream_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/stream"
)

// TestCutKeepsACardInPlace: a reply cut before a card is posted (an
// approval) shows, in order, what was said before the call, the card, and
// then the call and the answer, on every surface: the answer never lands
// above the card, the part before the cut is complete (no cursor, no
// running tool), and only the reply's first message answers the user's.
func TestCutKeepsACardInPlace(t *testing.T) {
	native := caps(4000)
	native.NativeStream = true
	tests := []struct {
		name   string
		caps   chat.Caps
		stream bool
		wait   time.Duration // before the cut: shown already, or not yet
	}{
		{"edit, shown", caps(4000), false, 2 * time.Second},
		{"edit, not shown yet", caps(4000), false, 0},
		{"native, shown", native, true, 2 * time.Second},
		{"native, not shown yet", native, true, 0},
		{"append-only, shown", appendCaps(4000), true, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ad := newAdapter(tt.caps)
				var plat chat.Adapter = ad
				if tt.stream {
					plat = ad.Streaming()
				}
				reply := &chat.MsgRef{Conv: dm, ID: "u1"}
				c := stream.New(plat, dm, stream.Options{ReplyTo: reply})
				c.Start(t.Context())
				c.SetText("Let me delete the build directory.")
				c.EndMessage()
				c.ToolStart("c1", "bash", cmd("rm -rf build"))
				time.Sleep(tt.wait)
				if err := c.Cut(t.Context()); err != nil {
					t.Fatal(err)
				}
				card, err := ad.Send(t.Context(), dm, chat.Out{Markdown: "CARD: allow bash?"})
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Second)
				c.ToolEnd("c1", false, "")
				c.SetText("Done: the build directory is gone.")
				refs, err := c.Finish(t.Context(), chat.Out{})
				if err != nil {
					t.Fatal(err)
				}
				msgs := ad.Messages(dm)
				at := func(sub string) int {
					return slices.IndexFunc(msgs, func(m string) bool { return strings.Contains(m, sub) })
				}
				before, cardAt, tool, answer := at("Let me delete"), at("CARD"), at("rm -rf build"), at("Done: the build")
				if before < 0 || !(before < cardAt && cardAt < tool && tool <= answer) {
					t.Fatalf("messages out of order (before %d, card %d, tool %d, answer %d):\n%s", before, cardAt, tool, answer, strings.Join(msgs, "\n---\n"))
				}
				if m := msgs[before]; strings.Contains(m, "▌") || strings.Contains(m, "rm -rf") {
					t.Errorf("the part before the cut is not complete as it was: %q", m)
				}
				if slices.Contains(refs, card) || len(refs) < 2 {
					t.Errorf("refs %v: want the reply's messages on both sides of the card, not the card", refs)
				}
				for i, ref := range refs {
					m, _ := ad.Message(ref)
					if answers := m.ReplyTo != nil && *m.ReplyTo == *reply; answers != (i == 0) {
						t.Errorf("message %d of the reply answers the user's: %v", i, answers)
					}
				}
				if tt.caps.AppendOnly {
					checkAppendOnly(t, ad.Calls())
				}
				checkNoViolations(t, ad)
			})
		})
	}
}
