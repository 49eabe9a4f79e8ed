package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// rawMode switches the terminal fd to the mode the terminal chat's line
// editor needs: no echo, no line buffering, keys read one at a time. Signals
// (Ctrl-C) and output processing stay on. restore puts the previous mode
// back.
func rawMode(fd int) (restore func() error, err error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, fmt.Errorf("terminal: get mode: %w", err)
	}
	raw := *old
	raw.Lflag &^= unix.ICANON | unix.ECHO | unix.IEXTEN
	raw.Iflag &^= unix.IXON
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &raw); err != nil {
		return nil, fmt.Errorf("terminal: set raw mode: %w", err)
	}
	return func() error {
		if err := unix.IoctlSetTermios(fd, ioctlSetTermios, old); err != nil {
			return fmt.Errorf("terminal: restore mode: %w", err)
		}
		return nil
	}, nil
}

// termSize returns the size of the terminal fd, or zeros when it is not
// one.
func termSize(fd int) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}
