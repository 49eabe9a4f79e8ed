package session

// IsLazy reports whether t was loaded lazily (Options.Lazy): it reads
// its messages' lines from the file.
func IsLazy(t *Tree) bool { return t.src != nil }

// SavedIndexPath is where x saves the index of path.
func SavedIndexPath(x *Indexes, path string) string { return x.savedPath(path) }

// SavedIndexMatches reports whether x has an index of path saved that
// matches the file (one that does not is removed).
func SavedIndexMatches(x *Indexes, path string) bool {
	f, err := FileStorage{}.OpenRange(path)
	if err != nil {
		return false
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return false
	}
	return x.loadSaved(path, f, size) != nil
}
