package tools

import (
	"context"
	"fmt"
	"io"
	"strconv"
)

func itoa(n int) string { return strconv.Itoa(n) }

// jsNumber prints a number the way JavaScript's String(n) does for the
// values tools see (integers and short decimals).
func jsNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// missing is the error for a missing required argument.
func missing(tool, field string) error {
	return failf("Validation failed for tool %q: %s: must have required property '%s'", tool, field, field)
}

// readAllCtx reads r, stopping early when ctx is cancelled.
func readAllCtx(ctx context.Context, r io.Reader) ([]byte, error) {
	var out []byte
	buf := make([]byte, 256*1024)
	for {
		if ctx.Err() != nil {
			return nil, errAborted
		}
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, &Error{Text: fmt.Sprintf("%v", err), Err: err}
		}
	}
}
