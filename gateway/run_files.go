package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
)

// Limits for received files.
const (
	maxFileBytes  = 20 << 20
	maxImageBytes = 5 << 20
)

// A sync.OnceValue of an immutable value: built on first use, not at start-up.
var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._-]+`) })

// receiver downloads an inbound file into the uploads directory of
// workspace ws; it returns a note for the prompt and, for images, a block
// (fileReceiver.receive).
type receiver func(ctx context.Context, ws string, conv chat.ConvRef, f chat.FileRef) (string, *llm.Content)

// fileReceiver receives the files of inbound messages through the
// adapters that can download them.
type fileReceiver struct {
	adapters map[chat.Platform]chat.Adapter
}

// receive downloads an inbound file into the uploads directory of
// workspace ws (the conversation's agent's). It returns a note for the
// prompt and, for images, a block.
func (fr fileReceiver) receive(ctx context.Context, ws string, conv chat.ConvRef, f chat.FileRef) (string, *llm.Content) {
	dl, ok := fr.adapters[conv.Platform].(chat.Downloader)
	if !ok {
		return fmt.Sprintf("[a file %q was attached, but this chat cannot download files]", f.Name), nil
	}
	if f.Size > maxFileBytes {
		return fmt.Sprintf("[file %q is %d MB, larger than the 20 MB limit; not downloaded]", f.Name, f.Size>>20), nil
	}
	name := f.Name
	if name == "" {
		name = f.Kind + "-" + f.ID
	}
	name = fmt.Sprintf("%s-%s", time.Now().UTC().Format("20060102-150405"), unsafeName().ReplaceAllString(filepath.Base(name), "_"))
	dir := filepath.Join(ws, "uploads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Sprintf("[file %q could not be saved: %v]", f.Name, err), nil
	}
	var buf bytes.Buffer
	if err := dl.Download(ctx, f, &limitWriter{w: &buf, n: maxFileBytes}); err != nil {
		return fmt.Sprintf("[file %q could not be downloaded: %v]", f.Name, err), nil
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		return fmt.Sprintf("[file %q could not be saved: %v]", f.Name, err), nil
	}
	note := fmt.Sprintf("[file received: uploads/%s (%d bytes)]", name, buf.Len())
	mime := f.MimeType
	if f.Kind == "photo" && mime == "" {
		mime = "image/jpeg"
	}
	if strings.HasPrefix(mime, "image/") && buf.Len() <= maxImageBytes {
		img := llm.ImageBlock(base64.StdEncoding.EncodeToString(buf.Bytes()), mime)
		return note, &img
	}
	return note, nil
}

var errTooLarge = errors.New("file exceeds the size limit")

// limitWriter fails once more than n bytes were written.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errTooLarge
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}
