package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/pibot/pibot/chat"
)

// Bot API file limits (cloud server).
const (
	maxDownload = 20 << 20 // getFile serves at most 20 MB
	maxUpload   = 50 << 20 // documents
	maxPhoto    = 10 << 20 // photos; larger images go as documents
	maxCaption  = 1024     // UTF-16 units
)

// transfers moves files: uploads into a chat, downloads of inbound files.
type transfers struct {
	calls *caller
	chats *chats
}

// upload sends a file (see Adapter.Upload).
func (t *transfers) upload(ctx context.Context, conv chat.ConvRef, f chat.OutFile, replyTo *chat.MsgRef) (chat.MsgRef, error) {
	chatID, thread, err := t.chats.target(conv)
	if err != nil {
		return chat.MsgRef{}, err
	}
	if f.Reader == nil {
		return chat.MsgRef{}, fmt.Errorf("telegram: upload %q: no content", f.Name)
	}
	if f.Size > maxUpload {
		return chat.MsgRef{}, fmt.Errorf("telegram: upload %q: %d bytes; bots may send files up to 50 MB", f.Name, f.Size)
	}
	name := f.Name
	if name == "" {
		name = "file"
	}
	caption := truncateUTF16(chat.Render(f.Caption, chat.DialectPlain), maxCaption)
	var rp *models.ReplyParameters
	if replyTo != nil {
		if id, err := msgID(*replyTo); err == nil {
			rp = &models.ReplyParameters{MessageID: id, AllowSendingWithoutReply: true}
		}
	}
	body := &models.InputFileUpload{Filename: name, Data: f.Reader}
	var msg *models.Message
	call := func(ctx context.Context) (err error) {
		if isPhoto(f) {
			msg, err = t.calls.bot.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chatID, MessageThreadID: thread, Photo: body, Caption: caption, ReplyParameters: rp})
		} else {
			msg, err = t.calls.bot.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chatID, MessageThreadID: thread, Document: body, Caption: caption, ReplyParameters: rp})
		}
		return err
	}
	if err := t.calls.do(ctx, modeUpload, chatID, "upload "+name, call); err != nil {
		return chat.MsgRef{}, err
	}
	return msgRef(conv, chatID, msg.ID), nil
}

func isPhoto(f chat.OutFile) bool {
	switch strings.ToLower(f.MimeType) {
	case "image/jpeg", "image/png", "image/webp":
		return f.Size > 0 && f.Size <= maxPhoto
	}
	return false
}

func truncateUTF16(s string, limit int) string {
	n := 0
	for i, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if n+w > limit {
			return s[:i]
		}
		n += w
	}
	return s
}

// download writes an inbound file to w (see Adapter.Download).
func (t *transfers) download(ctx context.Context, f chat.FileRef, w io.Writer) error {
	if f.Size > maxDownload {
		return fmt.Errorf("telegram: download %q: %d bytes; the Bot API serves files up to 20 MB", f.Name, f.Size)
	}
	var tf *models.File
	err := t.calls.do(ctx, modeAdmin, 0, "getFile", func(ctx context.Context) (err error) {
		tf, err = t.calls.bot.GetFile(ctx, &bot.GetFileParams{FileID: f.ID})
		return err
	})
	if err != nil {
		if strings.Contains(err.Error(), "file is too big") {
			return fmt.Errorf("telegram: download %q: the Bot API serves files up to 20 MB: %w", f.Name, err)
		}
		return err
	}
	if tf.FileSize > maxDownload {
		return fmt.Errorf("telegram: download %q: %d bytes; the Bot API serves files up to 20 MB", f.Name, tf.FileSize)
	}
	if tf.FilePath == "" {
		return fmt.Errorf("telegram: download %q: Telegram gave no file path", f.Name)
	}
	link := t.calls.api + "/file/bot" + t.calls.token.Reveal() + "/" + (&url.URL{Path: tf.FilePath}).EscapedPath()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return t.calls.wrap("download", err)
	}
	resp, err := t.calls.client.Do(req)
	if err != nil {
		return t.calls.wrap("download", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("telegram: download %q: HTTP %d", f.Name, resp.StatusCode)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, maxDownload+1))
	if err != nil {
		return t.calls.wrap("download", err)
	}
	if n > maxDownload {
		return errors.New("telegram: download: the file grew past 20 MB")
	}
	return nil
}
