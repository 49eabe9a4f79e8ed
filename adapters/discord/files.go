package discord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/bwmarrin/discordgo"

	"github.com/pibot/pibot/chat"
)

// maxUpload is the attachment size every server takes (10 MiB without
// boosts).
const maxUpload = 10 << 20

// cdnHosts serve attachments on the real Discord.
var cdnHosts = map[string]bool{"cdn.discordapp.com": true, "media.discordapp.net": true}

// Upload sends a file as a message attachment (multipart with
// payload_json), with the caption as its text. Uploads are not retried
// (the reader is consumed).
func (a *Adapter) Upload(ctx context.Context, conv chat.ConvRef, f chat.OutFile, replyTo *chat.MsgRef) (chat.MsgRef, error) {
	ch, err := channelOf(conv)
	if err != nil {
		return chat.MsgRef{}, err
	}
	if f.Reader == nil {
		return chat.MsgRef{}, fmt.Errorf("discord: upload %q: no content", f.Name)
	}
	if f.Size > maxUpload {
		return chat.MsgRef{}, fmt.Errorf("discord: upload %q: %d bytes; Discord takes files up to 10 MiB from bots", f.Name, f.Size)
	}
	name := f.Name
	if name == "" {
		name = "file"
	}
	caption := ""
	if f.Caption != "" {
		if parts := chunks(f.Caption); len(parts) > 0 {
			caption = chat.Render(parts[0], chat.DialectDiscord)
		}
	}
	body := io.LimitReader(f.Reader, maxUpload+1)
	ms := &discordgo.MessageSend{Content: caption, AllowedMentions: noMentions(), Flags: discordgo.MessageFlagsSuppressEmbeds,
		Files: []*discordgo.File{{Name: name, ContentType: f.MimeType, Reader: body}}}
	if replyTo != nil && isID(replyTo.ID) {
		fail := false
		ms.Reference = &discordgo.MessageReference{MessageID: replyTo.ID, ChannelID: ch, FailIfNotExists: &fail}
	}
	var msg *discordgo.Message
	err = a.calls.do(ctx, modeUpload, chanRoute(ch, "messages"), "upload "+name, func(opts ...discordgo.RequestOption) (err error) {
		msg, err = a.calls.s.ChannelMessageSendComplex(ch, ms, opts...)
		return err
	})
	if err != nil {
		return chat.MsgRef{}, err
	}
	return chat.MsgRef{Conv: conv, ID: msg.ID}, nil
}

// Download writes an inbound attachment to w. The file id is its CDN URL,
// fetched only from Discord's CDN (or the configured api_url's host), with
// no Authorization header. Files above the cap are refused before and
// while downloading.
func (a *Adapter) Download(ctx context.Context, f chat.FileRef, w io.Writer) error {
	limit := a.cfg.MaxDownload
	if f.Size > limit {
		return fmt.Errorf("discord: download %q: %d bytes; pibot takes attachments up to %d bytes", f.Name, f.Size, limit)
	}
	u, err := url.Parse(f.ID)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("discord: download %q: not an attachment URL", f.Name)
	}
	allowed := u.Scheme == "https" && cdnHosts[strings.ToLower(u.Hostname())]
	if a.api != nil && u.Scheme == a.api.Scheme && u.Host == a.api.Host {
		allowed = true
	}
	if !allowed {
		return fmt.Errorf("discord: download %q: %s is not Discord's CDN", f.Name, u.Host)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("discord: download %q: %w", f.Name, err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("discord: download %q: %w", f.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discord: download %q: HTTP %d", f.Name, resp.StatusCode)
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("discord: download %q: %w", f.Name, err)
	}
	if n > limit {
		return errors.New("discord: download: the file grew past the size cap")
	}
	return nil
}
