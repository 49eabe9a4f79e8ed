package assemble

import "github.com/pibot/pibot/llm"

// events hands a Builder's events to the consumer and keeps the contract's
// end: nothing after the consumer stopped iterating, nothing after the
// terminal event.
type events struct {
	yield   func(llm.Event) bool
	stopped bool // the consumer returned false
	ended   bool // the terminal event was sent
}

// over reports whether no event may be sent any more.
func (o *events) over() bool { return o.stopped || o.ended }

// emit sends e unless the stream is over; false when it is over now.
func (o *events) emit(e llm.Event) bool {
	if o.over() {
		return false
	}
	if !o.yield(e) {
		o.stopped = true
	}
	return !o.stopped
}

// last sends the terminal event e (unless the stream is over) and ends
// the stream.
func (o *events) last(e llm.Event) {
	o.emit(e)
	o.ended = true
}
