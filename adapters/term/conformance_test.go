package term

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
)

// The terminal chat passes the chat conformance suite: the user's lines
// come through a pipe, the transcript is what was printed.
func TestConformance(t *testing.T) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		in, typed := io.Pipe()
		t.Cleanup(func() { _ = typed.Close() })
		out := &buffer{}
		a, err := New(Config{In: in, Out: out})
		if err != nil {
			t.Fatal(err)
		}
		return adaptertest.Target{
			Adapter:    a,
			Conv:       Conv(),
			User:       UserID,
			Transcript: func(chat.ConvRef) string { return out.String() },
			Press: func(ctx context.Context, _ chat.MsgRef, n int, _ string) error {
				_, err := fmt.Fprintf(typed, "%d\n", n+1)
				return err
			},
		}
	})
}
