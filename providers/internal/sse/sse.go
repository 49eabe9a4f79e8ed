// Package sse reads a text/event-stream (Server-Sent Events) body with few
// allocations: event and data slices are reused between calls.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Event is one dispatched server-sent event. Its slices are valid only
// until the next call to Next.
type Event struct {
	// Name is the event field ("" when absent; "message" by the spec).
	Name []byte
	// Data is the data lines joined with "\n".
	Data []byte
}

// Reader parses events from an SSE stream.
type Reader struct {
	br    *bufio.Reader
	name  []byte
	data  []byte
	line  []byte
	lines int
	has   bool
	first bool
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), first: true}
}

// readLine returns the next line without its terminator.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.line = append(r.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			r.line = append(r.line, line...)
		}
		line = r.line
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, nil
}

// Next returns the next event, or io.EOF when the stream ends. An event
// cut off by the end of the stream is still dispatched.
func (r *Reader) Next() (Event, error) {
	r.name = r.name[:0]
	r.data = r.data[:0]
	r.has = false
	r.lines = 0
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && r.has {
				return Event{Name: r.name, Data: r.data}, nil
			}
			return Event{}, err
		}
		if r.first {
			r.first = false
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if len(line) == 0 {
			if r.has {
				return Event{Name: r.name, Data: r.data}, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			r.name = append(r.name[:0], value...)
			r.has = true
		case "data":
			if r.lines > 0 {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			r.lines++
			r.has = true
		}
	}
}
