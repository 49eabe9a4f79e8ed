package chattest

// callLogChunk is how many calls one block of a callLog holds.
const callLogChunk = 256

// callLog is the record of every call, in order, kept in fixed blocks: a
// long run (a benchmark with a thousand conversations) records hundreds
// of thousands of calls, and one growing slice would copy all of them
// again at every doubling.
type callLog struct {
	blocks [][]Call
	n      int
}

// add appends c.
func (l *callLog) add(c Call) {
	if k := len(l.blocks); k == 0 || len(l.blocks[k-1]) == callLogChunk {
		l.blocks = append(l.blocks, make([]Call, 0, callLogChunk))
	}
	last := &l.blocks[len(l.blocks)-1]
	*last = append(*last, c)
	l.n++
}

// all returns a copy of every call, in order; nil when none.
func (l *callLog) all() []Call {
	if l.n == 0 {
		return nil
	}
	out := make([]Call, 0, l.n)
	for _, b := range l.blocks {
		out = append(out, b...)
	}
	return out
}
