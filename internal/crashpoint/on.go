//go:build crashpoints

package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// armed is the point PIBOT_CRASHPOINT names and how many times it is
// reached before the process dies. A test build's own state: a release
// build has none (off.go).
var armed = sync.OnceValue(func() *target {
	spec := os.Getenv("PIBOT_CRASHPOINT")
	if spec == "" {
		return nil
	}
	name, n, _ := strings.Cut(spec, "#")
	t := &target{name: name, at: 1}
	if n != "" {
		at, err := strconv.Atoi(n)
		if err != nil || at < 1 {
			fmt.Fprintf(os.Stderr, "pibot: PIBOT_CRASHPOINT %q: the count after # must be a positive number\n", spec)
			os.Exit(2)
		}
		t.at = at
	}
	fmt.Fprintf(os.Stderr, "pibot: crash point %s armed (hit %d)\n", t.name, t.at)
	return t
})

// target is an armed point.
type target struct {
	name string
	at   int
	mu   sync.Mutex
	hits int
}

// Hit marks that the step name was reached: at the armed point's Nth
// time the process kills itself with SIGKILL.
func Hit(name string) {
	t := armed()
	if t == nil || t.name != name {
		return
	}
	t.mu.Lock() // held for good once the process dies here
	t.hits++
	if t.hits < t.at {
		t.mu.Unlock()
		return
	}
	fmt.Fprintf(os.Stderr, "pibot: crash point %s reached (hit %d): killed\n", name, t.hits)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not delivered late, but nothing runs past it
}

// InboxCompactAfter is PIBOT_CRASHPOINT_INBOX_COMPACT, the number of
// records after which the inbox may compact its file while running (0
// when unset: the inbox's own threshold). A value that is not a positive
// number stops the process, as a bad PIBOT_CRASHPOINT does.
func InboxCompactAfter() int64 {
	v := os.Getenv("PIBOT_CRASHPOINT_INBOX_COMPACT")
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "pibot: PIBOT_CRASHPOINT_INBOX_COMPACT %q: want a positive number of records\n", v)
		os.Exit(2)
	}
	return n
}
