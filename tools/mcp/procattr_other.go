//go:build !linux

package mcp

import "syscall"

// groupAttr puts a child in a process group of its own. Outside Linux there
// is no parent-death signal: a child pibot leaves behind when it is killed
// lives on until it ends by itself.
func groupAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
