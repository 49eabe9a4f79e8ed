package slack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	slackapi "github.com/slack-go/slack"

	"github.com/pibot/pibot/chat"
)

// maxUpload caps what Upload reads into memory when the size is unknown.
const maxUpload = 100 << 20

// Upload shares a file in conv's thread (files.getUploadURLExternal, the
// upload, files.completeUploadExternal). The caption is the file's
// comment. Slack shares the file asynchronously and gives no message ts,
// so the reference has no ID. Uploads are not retried (the reader is
// consumed).
func (a *Adapter) Upload(ctx context.Context, conv chat.ConvRef, f chat.OutFile, replyTo *chat.MsgRef) (chat.MsgRef, error) {
	if err := check(conv); err != nil {
		return chat.MsgRef{}, err
	}
	if f.Reader == nil {
		return chat.MsgRef{}, fmt.Errorf("slack: upload %q: no content", f.Name)
	}
	name := f.Name
	if name == "" {
		name = "file"
	}
	r, size := f.Reader, f.Size
	if size <= 0 {
		b, err := io.ReadAll(io.LimitReader(f.Reader, maxUpload+1))
		if err != nil {
			return chat.MsgRef{}, fmt.Errorf("slack: upload %q: read: %w", name, err)
		}
		if len(b) > maxUpload {
			return chat.MsgRef{}, fmt.Errorf("slack: upload %q: more than %d MiB", name, maxUpload>>20)
		}
		if len(b) == 0 {
			return chat.MsgRef{}, fmt.Errorf("slack: upload %q: the file is empty", name)
		}
		r, size = bytes.NewReader(b), int64(len(b))
	}
	thread := conv.Thread
	if thread == "" && replyTo != nil && replyTo.Conv.Thread != "" {
		thread = replyTo.Conv.Thread
	}
	p := slackapi.UploadFileParameters{Reader: r, FileSize: int(size), Filename: name, Title: name,
		InitialComment: render(f.Caption), Channel: conv.Channel, ThreadTimestamp: thread}
	err := a.calls.do(ctx, op{method: "files.completeUploadExternal", team: conv.Workspace, channel: conv.Channel, kind: kindUpload}, func(ctx context.Context) error {
		_, err := a.api.UploadFileContext(ctx, p)
		return err
	})
	if err != nil {
		return chat.MsgRef{}, err
	}
	return chat.MsgRef{Conv: conv}, nil
}

// errTooBig is a file above Config.MaxDownload.
var errTooBig = errors.New("file too big")

// Download writes an attached file to w, fetched from its private URL with
// the bot token (scope files:read). The URL must be on Slack or on the
// api_url host; the token goes nowhere else. A file above the size cap is
// refused with a clear error, before or while it is read.
func (a *Adapter) Download(ctx context.Context, f chat.FileRef, w io.Writer) error {
	limit := a.cfg.MaxDownload
	if f.Size > limit {
		return fmt.Errorf("slack: download %q: %d bytes, more than the %d MiB pibot takes: %w", f.Name, f.Size, limit>>20, errTooBig)
	}
	lw := &limitWriter{w: w, n: limit}
	err := a.calls.do(ctx, op{method: "files.download", team: a.rd.identity().teamID, channel: "", kind: kindUpload}, func(ctx context.Context) error {
		return a.api.GetFileContext(ctx, f.ID, lw)
	})
	if lw.over {
		return fmt.Errorf("slack: download %q: more than the %d MiB pibot takes: %w", f.Name, limit>>20, errTooBig)
	}
	return err
}

// limitWriter fails once more than n bytes were written.
type limitWriter struct {
	w    io.Writer
	n    int64
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		l.over = true
		return 0, errTooBig
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
