// Command startup measures whole-process start-up: it runs each given pibot
// binary with the same arguments N times, one run of each binary after the
// other (interleaved, so load on a shared machine falls on every binary
// alike), and reports per binary the wall time (mean, p50, p90), the
// process's user+system CPU time and its minor and major page faults.
//
// Usage:
//
//	go run ./bench/startup [-n 50] [-env K=V ...] -bin base=/tmp/pibot-main -bin new=./pibot -- version
//
// Every run's standard output is discarded; a run that exits non-zero stops
// the measurement with its standard error.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// binary is one binary under measurement and its samples.
type binary struct {
	name, path     string
	wall, cpu      []time.Duration
	minflt, majflt []int64
}

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	n := flag.Int("n", 50, "runs of each binary")
	var bins, env list
	flag.Var(&bins, "bin", "NAME=PATH of a binary to run (repeat)")
	flag.Var(&env, "env", "K=V added to every run's environment (repeat)")
	flag.Parse()
	if len(bins) == 0 {
		fmt.Fprintln(os.Stderr, "startup: at least one -bin NAME=PATH")
		os.Exit(2)
	}
	var bs []*binary
	for _, b := range bins {
		name, path, ok := strings.Cut(b, "=")
		if !ok {
			name, path = b, b
		}
		bs = append(bs, &binary{name: name, path: path})
	}
	args := flag.Args()
	for i := 0; i < *n+1; i++ {
		for _, b := range bs {
			if err := runOnce(b, args, env, i > 0); err != nil {
				fmt.Fprintf(os.Stderr, "startup: %s: %v\n", b.name, err)
				os.Exit(1)
			}
		}
	}
	fmt.Printf("%d interleaved runs of: %s\n", *n, strings.Join(args, " "))
	fmt.Printf("%-10s %9s %9s %9s %9s %8s %7s\n", "binary", "wall-mean", "wall-p50", "wall-p90", "cpu-p50", "minflt", "majflt")
	for _, b := range bs {
		fmt.Printf("%-10s %9s %9s %9s %9s %8d %7d\n", b.name,
			ms(mean(b.wall)), ms(pct(b.wall, 50)), ms(pct(b.wall, 90)), ms(pct(b.cpu, 50)),
			pct(b.minflt, 50), pct(b.majflt, 50))
	}
}

// runOnce runs b once; keep false makes it a warm-up whose figures are
// dropped (the first run of a new binary reads it from disk).
func runOnce(b *binary, args, env []string, keep bool) error {
	cmd := exec.Command(b.path, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	if !keep {
		return nil
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	b.wall = append(b.wall, wall)
	b.cpu = append(b.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	if ru != nil {
		b.minflt = append(b.minflt, ru.Minflt)
		b.majflt = append(b.majflt, ru.Majflt)
	}
	return nil
}

func mean(d []time.Duration) time.Duration {
	var s time.Duration
	for _, x := range d {
		s += x
	}
	return s / time.Duration(max(len(d), 1))
}

func pct[T int64 | time.Duration](v []T, p int) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
