package term

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/pibot/pibot/chat"
)

// OpenStream starts a live reply. On a live terminal every Update redraws
// the reply in place; otherwise nothing is printed until Finish prints the
// final text, so a pipe or a file gets each answer once.
func (a *Adapter) OpenStream(ctx context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	if err := checkConv(conv); err != nil {
		return nil, fmt.Errorf("term: open stream: %w", err)
	}
	return &stream{a: a, ref: chat.MsgRef{Conv: conv, ID: a.ids.next("b")}}, nil
}

// stream is one live reply on the terminal.
type stream struct {
	a   *Adapter
	ref chat.MsgRef

	mu   sync.Mutex
	done bool
}

// Update shows markdown as the reply so far (on a live terminal only).
func (s *stream) Update(ctx context.Context, markdown string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return fmt.Errorf("term: stream update: stream ended")
	}
	if !s.a.disp.live {
		return nil
	}
	s.a.show(s.ref, chat.Out{Markdown: markdown}, true)
	return nil
}

// Finish shows the final message, with its buttons, and ends the stream.
func (s *stream) Finish(ctx context.Context, final chat.Out) (chat.MsgRef, error) {
	if err := checkButtons(final.Buttons); err != nil {
		return chat.MsgRef{}, fmt.Errorf("term: stream finish: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return chat.MsgRef{}, fmt.Errorf("term: stream finish: stream ended")
	}
	s.done = true
	s.a.show(s.ref, final, false)
	return s.ref, nil
}

// Abort ends the stream and takes its text off a live terminal, where the
// cursor can still reach it.
func (s *stream) Abort(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	d := s.a.disp
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.msgs[s.ref.ID] == nil {
		return nil
	}
	delete(d.msgs, s.ref.ID)
	if i := d.tail.find(s.ref.ID); i >= 0 {
		defer d.hidePrompt()()
		d.tail.remove(i)
	}
	return nil
}

// show prints the message ref (new) or brings it up to date. open says
// the stream goes on: on a live terminal it stays at the end of the
// output.
func (a *Adapter) show(ref chat.MsgRef, m chat.Out, open bool) {
	text := strings.TrimRight(chat.Render(m.Markdown, a.dialect), "\n")
	a.disp.mu.Lock()
	defer a.disp.mu.Unlock()
	defer a.disp.hidePrompt()()
	a.disp.put(ref, shown{markdown: m.Markdown, text: text, buttons: m.Buttons}, open)
}
