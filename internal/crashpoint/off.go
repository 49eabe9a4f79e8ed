//go:build !crashpoints

package crashpoint

// Hit marks that the step name was reached. In a release build it does
// nothing.
func Hit(name string) {}

// InboxCompactAfter is the inbox's compaction threshold a test sets (0:
// the inbox's own). In a release build it is always 0.
func InboxCompactAfter() int64 { return 0 }
