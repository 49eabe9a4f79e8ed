//go:build !linux

package secret

import "os"

// ScrubEnviron removes the named variables from the process environment
// as far as this system allows: os.Unsetenv drops them from Go's copy
// (what child processes inherit). Outside Linux there is no
// /proc/self/mem to overwrite the initial environment block with, so the
// values may stay readable there (macOS shows it to the same user with
// `ps -E`); ScrubEnviron reports that as ErrScrubPartial once the
// variables are unset, so the caller can say so.
func ScrubEnviron(names []string) error {
	if len(names) == 0 {
		return nil
	}
	for _, n := range names {
		os.Unsetenv(n) //nolint:errcheck // cannot fail for a valid name
	}
	return ErrScrubPartial
}
