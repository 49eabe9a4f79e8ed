package term

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pibot/pibot/chat"
)

// maxLine is the longest input line.
const maxLine = 1 << 20

// deadliner is an input whose blocked Read can be interrupted (an
// *os.File on a pollable descriptor, a net.Conn).
type deadliner interface {
	SetReadDeadline(t time.Time) error
}

// Run reads the user's lines and hands them to sink, one at a time: a line
// is delivered only after the previous one was accepted. It returns nil at
// the end of the input, after the last line was handed over, or when ctx
// ends. If ctx ends while a read is blocked and the input cannot be
// interrupted (a terminal's stdin), that read finishes in the background
// when the next line arrives or the input is closed.
func (a *Adapter) Run(ctx context.Context, sink chat.Sink) error {
	if sink == nil {
		return fmt.Errorf("term: run: nil sink")
	}
	lines := make(chan string)
	quit := make(chan struct{})
	readDone := make(chan error, 1)
	go func() {
		if a.edit {
			readDone <- a.readEdited(lines, quit)
			close(lines)
			return
		}
		sc := bufio.NewScanner(a.in)
		sc.Buffer(make([]byte, 0, 4096), maxLine)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				readDone <- nil
				return
			}
		}
		readDone <- sc.Err()
		close(lines)
	}()

	var pending []string // lines continued with a trailing "\"
	for {
		select {
		case <-ctx.Done():
			close(quit)
			if d, ok := a.in.(deadliner); ok && d.SetReadDeadline(time.Now()) == nil {
				<-readDone
			}
			return nil
		case line, ok := <-lines:
			if !ok {
				if len(pending) > 0 {
					a.handle(ctx, sink, strings.Join(pending, "\n"))
				}
				if err := <-readDone; err != nil {
					return fmt.Errorf("term: read: %w", err)
				}
				return nil
			}
			line = strings.TrimSuffix(line, "\r")
			if cont, ok := strings.CutSuffix(line, `\`); ok {
				pending = append(pending, cont)
				continue
			}
			a.handle(ctx, sink, strings.Join(append(pending, line), "\n"))
			pending = nil
		}
	}
}

// handle turns one input into an inbound event and delivers it; a refusal
// is printed, so the user knows to send it again.
func (a *Adapter) handle(ctx context.Context, sink chat.Sink, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	conv := Conv()
	in := chat.Inbound{
		Kind:      chat.KindMessage,
		Conv:      conv,
		User:      chat.User{ID: UserID, Name: "you"},
		Text:      text,
		Mentioned: true,
		Time:      time.Now().UTC(),
	}
	a.disp.mu.Lock()
	digits := strings.TrimSpace(text)
	n, err := strconv.Atoi(digits)
	isKey := err == nil && digits[0] != '+' && digits[0] != '-' && len(a.disp.keys) > 0
	if isKey && (n < 1 || n > len(a.disp.keys)) {
		show := a.disp.hidePrompt()
		a.disp.note(fmt.Sprintf("no button %d: type a number from 1 to %d", n, len(a.disp.keys)))
		show()
		a.disp.mu.Unlock()
		return
	}
	var pressed chat.Button
	if isKey {
		pressed = a.disp.keys[n-1]
		in.Kind = chat.KindAction
		in.Text = ""
		in.Msg = a.disp.keyMsg
		in.Action = &chat.Action{Data: pressed.ID, Msg: a.disp.keyMsg}
		a.disp.keys = nil // one press per set of buttons
	}
	keyMsg := a.disp.keyMsg
	a.disp.mu.Unlock()

	if isKey {
		in.DedupKey = "term:" + a.ids.next("a")
		in.Interaction = &chat.Interaction{Platform: Platform, ID: in.DedupKey, Conv: conv, Msg: keyMsg, User: UserID}
	} else {
		in.Msg = chat.MsgRef{Conv: conv, ID: a.ids.next("u")}
		in.DedupKey = "term:" + in.Msg.ID
		in.Command = chat.ParseCommand(text, "")
	}
	if err := sink(ctx, in); err != nil {
		a.disp.mu.Lock()
		defer a.disp.mu.Unlock()
		defer a.disp.hidePrompt()()
		if isKey {
			a.disp.note(fmt.Sprintf("! %q not delivered: %v — press it again", pressed.Label, err))
			if a.disp.keys == nil && a.disp.keyMsg == keyMsg {
				if s := a.disp.msgs[keyMsg.ID]; s != nil {
					for _, row := range s.buttons {
						a.disp.keys = append(a.disp.keys, row...)
					}
				}
			}
		} else {
			a.disp.note(fmt.Sprintf("! not delivered: %v — send it again", err))
		}
	}
}
