// Package toolstest provides fakes for testing code that uses package
// tools.
package toolstest

import (
	"context"
	"io"
	"sync"
)

// File is one file received by an Attacher.
type File struct {
	Name, MimeType string
	Data           []byte
	Size           int64
}

// Attacher records attached files. Err, when set, is returned instead.
type Attacher struct {
	mu    sync.Mutex
	Err   error
	files []File
}

// Attach records the file.
func (a *Attacher) Attach(_ context.Context, name, mimeType string, r io.Reader, size int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Err != nil {
		return a.Err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	a.files = append(a.files, File{Name: name, MimeType: mimeType, Data: b, Size: size})
	return nil
}

// Files returns the files attached so far.
func (a *Attacher) Files() []File {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]File(nil), a.files...)
}
