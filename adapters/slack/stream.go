package slack

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
)

// maxStreamChunk is the most markdown_text one start, append or stop call
// carries.
const maxStreamChunk = 12000

// OpenStream opens a native Slack stream in a thread: the first Update
// starts it (chat.startStream, as a reply in conv's thread), later ones
// append what is new (chat.appendStream), Finish appends the rest and
// stops it with the buttons under the text (chat.stopStream). The stream
// is append-only (Caps.AppendOnly). In channels Slack requires the
// recipient (opts.Recipient, and opts.RecipientTeam or the workspace).
func (a *Adapter) OpenStream(_ context.Context, conv chat.ConvRef, opts chat.StreamOptions) (chat.Stream, error) {
	if err := check(conv); err != nil {
		return nil, err
	}
	thread := conv.Thread
	if thread == "" && opts.ReplyTo != nil && conv.DM {
		thread = opts.ReplyTo.ID
	}
	if thread == "" {
		return nil, errors.New("slack: streams are thread replies; post and update in " + conv.Key())
	}
	s := &stream{a: a, conv: conv, thread: thread}
	if !conv.DM {
		if opts.Recipient == "" {
			return nil, errors.New("slack: a stream in a channel needs its recipient (recipient_user_id)")
		}
		s.user, s.team = opts.Recipient, opts.RecipientTeam
		if s.team == "" {
			s.team = conv.Workspace
		}
	}
	return s, nil
}

// stream is one reply streamed with chat.startStream / appendStream /
// stopStream.
type stream struct {
	a          *Adapter
	conv       chat.ConvRef
	thread     string
	user, team string // recipient, in channels

	mu   sync.Mutex
	ts   string // the streamed message; "" until started
	sent string // markdown shown so far
	done bool
}

var errStreamDone = errors.New("slack: stream already finished")

// Update shows markdown, which must extend what the stream shows: only
// the addition is sent.
func (s *stream) Update(ctx context.Context, markdown string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errStreamDone
	}
	if !strings.HasPrefix(markdown, s.sent) {
		return fmt.Errorf("slack: stream update: %w", chat.ErrNotAppend)
	}
	return s.push(ctx, markdown, kindLive)
}

// push sends what markdown adds to s.sent: a start, or appends in pieces
// of at most maxStreamChunk. A live push holds back a trailing "<…" that
// may still become a mention, so that every mention goes out whole and
// defused (see defuse).
func (s *stream) push(ctx context.Context, markdown string, k kind) error {
	if k == kindLive {
		markdown = markdown[:holdBack(markdown)]
	}
	for len(markdown) > len(s.sent) {
		delta := markdown[len(s.sent):]
		if r := []rune(delta); len(r) > maxStreamChunk {
			delta = string(r[:maxStreamChunk])
		}
		if err := s.call(ctx, defuse(delta), k); err != nil {
			return err
		}
		s.sent += delta
	}
	return nil
}

// mentionRE matches the start of Slack's special mentions (@channel,
// @here, @everyone, user groups, users, channels).
// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var mentionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<(!(?:here|channel|everyone|subteam\^)|@[UWB]|#C)`) })

// defuse puts a zero-width space after the "<" of every Slack mention in
// model text, so that a streamed answer never pings a channel or a person
// (model output is untrusted); it reads the same.
func defuse(md string) string { return mentionRE().ReplaceAllString(md, "<\u200b$1") }

// holdBack returns where the text that may be sent now ends: before a last
// "<" that is followed by no ">" or space yet (it may grow into a
// mention).
func holdBack(md string) int {
	i := strings.LastIndexByte(md, '<')
	if i < 0 || len(md)-i > 24 || strings.ContainsAny(md[i:], "> \n\t") {
		return len(md)
	}
	return i
}

// call starts the stream with delta, or appends delta.
func (s *stream) call(ctx context.Context, delta string, k kind) error {
	if s.ts == "" {
		opts := []slackapi.MsgOption{slackapi.MsgOptionTS(s.thread), slackapi.MsgOptionMarkdownText(delta)}
		if s.user != "" {
			opts = append(opts, slackapi.MsgOptionRecipientUserID(s.user), slackapi.MsgOptionRecipientTeamID(s.team))
		}
		return s.a.calls.do(ctx, op{method: "chat.startStream", team: s.conv.Workspace, channel: s.conv.Channel, kind: k}, func(ctx context.Context) error {
			_, ts, err := s.a.api.StartStreamContext(ctx, s.conv.Channel, opts...)
			if err == nil && ts == "" {
				err = errors.New("chat.startStream answered no ts")
			}
			s.ts = ts
			return err
		})
	}
	return s.a.calls.do(ctx, op{method: "chat.appendStream", team: s.conv.Workspace, channel: s.conv.Channel, kind: k, msg: s.ts}, func(ctx context.Context) error {
		_, _, err := s.a.api.AppendStreamContext(ctx, s.conv.Channel, s.ts, slackapi.MsgOptionMarkdownText(delta))
		return err
	})
}

// Finish appends what final adds and stops the stream, with final's
// buttons under the text. A final text that does not extend what was shown
// is chat.ErrNotAppend and the stream stays open.
func (s *stream) Finish(ctx context.Context, final chat.Out) (chat.MsgRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return chat.MsgRef{}, errStreamDone
	}
	if !strings.HasPrefix(final.Markdown, s.sent) {
		return chat.MsgRef{}, fmt.Errorf("slack: stream finish: %w", chat.ErrNotAppend)
	}
	if strings.TrimSpace(final.Markdown) == "" {
		return chat.MsgRef{}, errors.New("slack: stream finish: empty message")
	}
	buttons, err := actions(final.Buttons)
	if err != nil {
		return chat.MsgRef{}, err
	}
	// Everything but the last piece goes out as appends; the last rides
	// on the stop.
	if r := []rune(final.Markdown[len(s.sent):]); len(r) > maxStreamChunk {
		if err := s.push(ctx, s.sent+string(r[:len(r)-maxStreamChunk]), kindFinal); err != nil {
			return chat.MsgRef{}, err
		}
	}
	if s.ts == "" {
		// Nothing shown yet: start with the text, stop with the buttons.
		if err := s.push(ctx, final.Markdown, kindFinal); err != nil {
			return chat.MsgRef{}, err
		}
	}
	var opts []slackapi.MsgOption
	if delta := final.Markdown[len(s.sent):]; delta != "" {
		opts = append(opts, slackapi.MsgOptionMarkdownText(defuse(delta)))
	}
	if buttons != nil {
		opts = append(opts, slackapi.MsgOptionBlocks(buttons))
	}
	if err := s.stop(ctx, opts...); err != nil {
		return chat.MsgRef{}, err
	}
	s.sent, s.done = final.Markdown, true
	return chat.MsgRef{Conv: s.conv, ID: s.ts}, nil
}

func (s *stream) stop(ctx context.Context, opts ...slackapi.MsgOption) error {
	return s.a.calls.do(ctx, op{method: "chat.stopStream", team: s.conv.Workspace, channel: s.conv.Channel, kind: kindFinal, msg: s.ts}, func(ctx context.Context) error {
		_, _, err := s.a.api.StopStreamContext(ctx, s.conv.Channel, s.ts, opts...)
		return err
	})
}

// Abort stops a started stream without adding to it, so that no stream is
// left open.
func (s *stream) Abort(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	s.done = true
	if s.ts == "" {
		return nil
	}
	return s.stop(ctx)
}
