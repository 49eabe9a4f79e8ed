package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Error is a tool failure. Its text is what the model sees in the isError
// tool result, so it carries pi's exact wording.
type Error struct {
	Text string
	Err  error
}

func (e *Error) Error() string { return e.Text }

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// failf returns an *Error with a formatted text.
func failf(format string, a ...any) error {
	return &Error{Text: fmt.Sprintf(format, a...)}
}

// errAborted is pi's text for a tool cancelled before or while it ran.
var errAborted = &Error{Text: "Operation aborted"}

// errnoCode returns Node's error code and message for an I/O error.
func errnoCode(err error) (code, msg string) {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
	case errors.Is(err, fs.ErrNotExist):
		errno = syscall.ENOENT
	case errors.Is(err, fs.ErrPermission):
		errno = syscall.EACCES
	default:
		return "", err.Error()
	}
	names := map[syscall.Errno][2]string{
		syscall.ENOENT:  {"ENOENT", "no such file or directory"},
		syscall.EACCES:  {"EACCES", "permission denied"},
		syscall.EPERM:   {"EPERM", "operation not permitted"},
		syscall.EISDIR:  {"EISDIR", "illegal operation on a directory"},
		syscall.ENOTDIR: {"ENOTDIR", "not a directory"},
		syscall.EEXIST:  {"EEXIST", "file already exists"},
		syscall.EROFS:   {"EROFS", "read-only file system"},
		syscall.ENOSPC:  {"ENOSPC", "no space left on device"},
		syscall.ELOOP:   {"ELOOP", "too many symbolic links encountered"},
	}
	if n, ok := names[errno]; ok {
		return n[0], n[1]
	}
	return fmt.Sprintf("E%d", int(errno)), errno.Error()
}

// nodeError formats an I/O error the way Node does, e.g.
// "ENOENT: no such file or directory, access '/ws/x'".
func nodeError(err error, syscallName, path string) error {
	code, msg := errnoCode(err)
	if code == "" {
		return &Error{Text: msg, Err: err}
	}
	return &Error{Text: fmt.Sprintf("%s: %s, %s '%s'", code, msg, syscallName, path), Err: err}
}
