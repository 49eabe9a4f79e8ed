package llm

import (
	"math"
	"strconv"
)

// Usage is in every assistant line of a session file, so it is encoded
// without encoding/json when it can be: its reflection walks the Cost
// struct through two nested encoders (two levels of marshalers), which
// took a kilobyte and a half of the goroutine's stack on the deepest path
// a run takes (the gateway records the message from inside the agent's
// stream handling) and made that stack overflow and be copied on most
// replies. The output is byte for byte what encoding/json writes.

// plainJSON reports whether u encodes without encoding/json: no unknown
// keys (json.RawMessage values encoding/json compacts) and finite costs
// (encoding/json refuses the others).
func (u *Usage) plainJSON() bool {
	if len(u.Extra) > 0 {
		return false
	}
	c := &u.Cost
	for _, f := range [...]float64{c.Input, c.Output, c.CacheRead, c.CacheWrite, c.Total} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

// appendJSON appends u as Usage.MarshalJSON encodes it; u is plainJSON.
func (u *Usage) appendJSON(b []byte) []byte {
	b = append(b, `{"input":`...)
	b = strconv.AppendInt(b, u.Input, 10)
	b = append(b, `,"output":`...)
	b = strconv.AppendInt(b, u.Output, 10)
	b = append(b, `,"cacheRead":`...)
	b = strconv.AppendInt(b, u.CacheRead, 10)
	b = append(b, `,"cacheWrite":`...)
	b = strconv.AppendInt(b, u.CacheWrite, 10)
	if !u.NoTotal || u.TotalTokens != 0 {
		b = append(b, `,"totalTokens":`...)
		b = strconv.AppendInt(b, u.TotalTokens, 10)
	}
	b = append(b, `,"cost":{"input":`...)
	b = appendJSONFloat(b, u.Cost.Input)
	b = append(b, `,"output":`...)
	b = appendJSONFloat(b, u.Cost.Output)
	b = append(b, `,"cacheRead":`...)
	b = appendJSONFloat(b, u.Cost.CacheRead)
	b = append(b, `,"cacheWrite":`...)
	b = appendJSONFloat(b, u.Cost.CacheWrite)
	b = append(b, `,"total":`...)
	b = appendJSONFloat(b, u.Cost.Total)
	return append(b, "}}"...)
}

// appendJSONFloat appends the finite f as encoding/json encodes a float64:
// the shortest decimal that reads back as f, in exponent form only for
// very small or very large magnitudes, with a one-digit exponent not
// padded ("1e-7", not "1e-07").
func appendJSONFloat(b []byte, f float64) []byte {
	if f == 0 && !math.Signbit(f) {
		return append(b, '0') // the usual cost of a model without prices
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
