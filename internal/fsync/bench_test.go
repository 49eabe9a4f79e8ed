package fsync

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkData appends a session-sized line (300 bytes) and makes it
// durable, as a message's group commit does: it reports the CPU that
// costs the process, in user space (user-ns/op) and in the kernel on its
// behalf (sys-ns/op). The kernel's part is the fdatasync's own work, which
// no caller can save except by syncing less often; on virtual disks it is
// the larger part of what a message costs (bench/gateway/cpusplit.sh).
// The file is in the benchmark's temporary directory: TMPDIR picks the
// disk.
func BenchmarkData(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "line.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := make([]byte, 300)
	for i := range line {
		line[i] = 'x'
	}
	line[len(line)-1] = '\n'
	user0, sys0 := cpuTime(b)
	for b.Loop() {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := Data(f); err != nil {
			b.Fatal(err)
		}
	}
	user, sys := cpuTime(b)
	b.ReportMetric(float64((user-user0).Nanoseconds())/float64(b.N), "user-ns/op")
	b.ReportMetric(float64((sys-sys0).Nanoseconds())/float64(b.N), "sys-ns/op")
}

// cpuTime is the CPU time this process has used, in user space and in
// the kernel.
func cpuTime(tb testing.TB) (user, system time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
