package session

import (
	"errors"
	"fmt"
	"io/fs"
)

// CustomLease is the customType of the marker a new lease holder writes
// when it takes a file over (a lease fence above every fence in the file).
// Its data is LeaseMarker.
const CustomLease = "pibot.lease"

// LeaseMarker is the data of a CustomLease entry.
type LeaseMarker struct {
	Fence  int64  `json:"fence"`
	Holder string `json:"holder"`           // the replica that took over: host/pid
	Prev   int64  `json:"prevFence"`        // the highest fence before it (0: none)
	At     string `json:"at"`               // RFC 3339
	Reason string `json:"reason,omitempty"` // why, for a reader of the file
}

// HighestFence returns the highest fence of the entries in the file at
// path: 0 when no entry carries one or the file does not exist. A lease
// for the file is granted above it (cluster mode: a lease store that lost
// its counter must not hand out a fence the file's readers would ignore).
// Only top-level "fence" members count; a torn or bad line is skipped.
func HighestFence(storage Storage, path string) (int64, error) {
	data, err := storage.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("session: read fence of %s: %w", path, err)
	}
	var highest int64
	for _, l := range scanLines(data) {
		if l.blank || l.err != nil || l.n == nil {
			continue
		}
		highest = max(highest, l.n.fence)
	}
	return highest, nil
}
