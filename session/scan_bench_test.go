package session

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkScanLine scans every line of a session file named by
// PIBOT_BENCH_FILE (skipped without it): the validation speed that bounds
// WriteContext's validate step.
func BenchmarkScanLine(b *testing.B) {
	name := os.Getenv("PIBOT_BENCH_FILE")
	if name == "" {
		b.Skip("PIBOT_BENCH_FILE not set")
	}
	data, err := os.ReadFile(name)
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		for _, l := range lines {
			if _, err := scanLine(l); err != nil {
				b.Fatal(err)
			}
		}
	}
}
