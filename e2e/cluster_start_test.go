package e2e

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startRounds is how many times TestClusterConcurrentStarts starts its
// replicas: PIBOT_E2E_START_ROUNDS, or startRoundsDefault.
const startRoundsDefault = 20

// TestClusterConcurrentStarts replays issue #29: three `pibot serve`
// replicas started at the same moment on one data directory and one
// Redis, again and again (the data directory keeps what earlier rounds
// wrote). Each time all three come up; before every writer of the data
// directory had a temporary file of its own, about one start in three
// lost a replica at once to "schedules: schedule: save: rename
// …/schedules.json.tmp …/schedules.json: no such file or directory".
func TestClusterConcurrentStarts(t *testing.T) {
	w := newClusterWorld(t)
	rounds := startRoundsDefault
	if v := os.Getenv("PIBOT_E2E_START_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PIBOT_E2E_START_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	began := time.Now()
	for round := range rounds {
		all := w.replicas(3, replicaOpts{})
		if round == 0 {
			w.say(all[1], "after the first start")
			w.waitAnswered([]string{"after the first start"}, 30*time.Second)
			w.waitRecorded(1)
		}
		w.stopAll(all)
	}
	t.Logf("%d of %d concurrent starts of 3 replicas came up, in %v", rounds, rounds, time.Since(began).Round(time.Second))
}

// stopAll sends every replica SIGTERM at once and waits until each
// exited with status 0.
func (w *clusterWorld) stopAll(all []*crashPibot) {
	w.t.Helper()
	for _, p := range all {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.After(30 * time.Second)
	for _, p := range all {
		select {
		case <-p.exited:
		case <-deadline:
			w.t.Fatalf("replica %s did not stop on SIGTERM:\n%s", p.base, p.stderr)
		}
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			w.t.Errorf("replica %s exited with %d after SIGTERM:\n%s", p.base, code, p.stderr)
		}
	}
}
