package groupsync

// pending is what a File accepted and has not written to the file yet:
// the writes in one buffer, their count, and a spare buffer for the next
// ones. It has no lock: its File holds mu around every use.
type pending struct {
	buf     []byte // writes not yet in the file
	spare   []byte // an empty buffer written out before, for the next buf
	written uint64 // writes accepted
}

// add appends b and returns its number, the count of writes accepted.
func (p *pending) add(b []byte) uint64 {
	if p.buf == nil {
		p.buf, p.spare = p.spare, nil
	}
	p.buf = append(p.buf, b...)
	p.written++
	return p.written
}

// take empties the buffer: it returns what it held and the count of
// writes accepted so far, all of which are then out of it.
func (p *pending) take() (data []byte, upTo uint64) {
	data = p.buf
	p.buf = nil
	return data, p.written
}

// unwrite puts data taken from the buffer back in front of it.
func (p *pending) unwrite(data []byte) {
	p.buf = append(data, p.buf...)
}

// keptBuffer is the largest buffer kept for the next writes: an inbox
// writes a few hundred bytes at a time; a rare burst is not kept.
const keptBuffer = 64 << 10

// reuse keeps data, written out and copied, for the next writes: as their
// buffer when none has begun one, else as the spare the one after takes.
// A busy inbox gathered a new buffer for every group, grown write by write
// while the last group was being written. The caller keeps no buffer
// larger than keptBuffer.
func (p *pending) reuse(data []byte) {
	switch {
	case p.buf == nil:
		p.buf = data[:0]
	case p.spare == nil:
		p.spare = data[:0]
	}
}
