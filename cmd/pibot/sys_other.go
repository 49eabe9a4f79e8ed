//go:build !linux

package main

import "golang.org/x/sys/unix"

// hardenProcess does nothing outside Linux: there is no dumpable flag
// to clear (on macOS, processes of the same user cannot read pibot's
// memory without the debugger entitlement or root anyway).
func hardenProcess() {}

// termiosGet is the ioctl that reads a terminal's settings.
const termiosGet = unix.TIOCGETA
