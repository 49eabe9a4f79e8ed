// Package access decides who may talk to pibot: owners, allowed users,
// DM policies (pairing, allowlist, open, disabled), group allowlists and
// mention gating, and it keeps the pairing store (codes a stranger gets in
// a DM and an owner approves with `pibot pairing approve`).
//
// The agent has no path to this package: only the owner CLI and owner
// commands change who is allowed.
package access
