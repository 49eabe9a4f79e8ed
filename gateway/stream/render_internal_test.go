package stream

import (
	"testing"
	"time"
)

// TestRenderOneMessage: a reply that is one message of text renders as
// the text, trimmed, with an open code fence closed, and without a copy;
// thinking (in Verbose) and a live status line still take the full path.
func TestRenderOneMessage(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name, text, thinking, status string
		v                            Verbosity
		live                         bool
		want                         string
	}{
		{name: "text", text: "Sure, here is the answer.", v: Tools, live: true, want: "Sure, here is the answer."},
		{name: "blank edges", text: "\n\nhello \n\n", v: Tools, live: true, want: "hello"},
		{name: "open fence", text: "code:\n```go\nx := 1", v: Tools, live: true, want: "code:\n```go\nx := 1\n```"},
		{name: "empty", text: "", v: Tools, live: true, want: ""},
		{name: "thinking hidden", text: "hi", thinking: "hmm", v: Tools, live: true, want: "hi"},
		{name: "thinking shown", text: "hi", thinking: "hmm", v: Verbose, live: true, want: "> 💭 hmm\n\nhi"},
		{name: "status live", text: "hi", status: "retrying", v: Tools, live: true, want: "hi\n\n_retrying_"},
		{name: "status final", text: "hi", status: "retrying", v: Tools, live: false, want: "hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d document
			d.setThinking(tc.thinking)
			d.setText(tc.text)
			d.status = tc.status
			if got := d.render(tc.v, now, tc.live); got != tc.want {
				t.Errorf("render = %q, want %q", got, tc.want)
			}
		})
	}
	var d document
	d.setText("Sure, here is a short answer that streams sixteen tokens to the chat.")
	if n := testing.AllocsPerRun(20, func() { d.render(Tools, now, true) }); n != 0 {
		t.Errorf("rendering a one-message reply allocates %.0f times, want 0", n)
	}
}
