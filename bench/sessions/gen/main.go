// Command gen writes realistic pi-format session files for benchmarks:
// gen -n 100000 -o 100k.jsonl (about 160 MB).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/pibot/pibot/session/sessiontest"
)

func main() {
	n := flag.Int("n", 10000, "number of entries")
	out := flag.String("o", "", "output file (required)")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "gen: -o is required")
		os.Exit(2)
	}
	if err := run(*out, *n, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(path string, n int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := sessiontest.Generate(f, n, seed); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
