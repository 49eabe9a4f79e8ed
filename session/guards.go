package session

// The storages and their files satisfy the interfaces the store uses.
var (
	_ Storage = FileStorage{}
	_ Storage = (*MemStorage)(nil)
	_ File    = (*osFile)(nil)
	_ File    = (*memFile)(nil)

	_ FileIdentifier = rangeFile{}
)
