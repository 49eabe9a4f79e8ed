package session

// IsLazy reports whether t was loaded lazily (Options.Lazy): it reads
// its messages' lines from the file.
func IsLazy(t *Tree) bool { return t.src != nil }
