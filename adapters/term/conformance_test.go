package term

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/pibot/pibot/adapters/term/termtest"
	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/chat/adaptertest"
)

// The terminal chat passes the chat conformance suite: the user's lines
// come through a pipe, the transcript is what was printed; on a live
// terminal it is what the screen shows, where edits replace the old text.
func TestConformance(t *testing.T) {
	for _, live := range []bool{false, true} {
		t.Run(map[bool]string{false: "pipe", true: "live"}[live], func(t *testing.T) { conformance(t, live) })
	}
}

func conformance(t *testing.T, live bool) {
	adaptertest.Run(t, func(t *testing.T) adaptertest.Target {
		in, typed := io.Pipe()
		t.Cleanup(func() { _ = typed.Close() })
		out := &buffer{}
		scr := termtest.NewScreen(80, 1000)
		cfg := Config{In: in, Out: out}
		transcript := out.String
		if live {
			cfg.Out, cfg.Live, cfg.Size = scr, true, func() (int, int) { return 80, 1000 }
			transcript = scr.Text
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return adaptertest.Target{
			Adapter:    a,
			Conv:       Conv(),
			User:       UserID,
			InPlace:    live,
			Transcript: func(chat.ConvRef) string { return transcript() },
			Press: func(ctx context.Context, _ chat.MsgRef, n int, _ string) error {
				_, err := fmt.Fprintf(typed, "%d\n", n+1)
				return err
			},
			// The user types a line: a message or a command in the one
			// conversation there is (no groups, no threads).
			Deliver: func(ctx context.Context, ev adaptertest.Event) (adaptertest.Delivered, error) {
				line := ev.Text
				switch ev.Kind {
				case adaptertest.EventDM:
				case adaptertest.EventCommand:
					line = "/" + ev.Text
				default:
					return adaptertest.Delivered{}, errors.ErrUnsupported
				}
				_, err := fmt.Fprintln(typed, line)
				return adaptertest.Delivered{Conv: Conv()}, err
			},
		}
	})
}
