package session_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

const (
	crashEnv     = "PIBOT_SESSION_CRASH_FILE"
	crashSyncEnv = "PIBOT_SESSION_CRASH_SYNC"
)

// crashChild appends entries forever and prints each id once Append
// returned: with SyncAlways it is durable then, with SyncWritten
// (crashSyncEnv=written) it is in the file, which is what survives a
// crash of the process. The parent kills it.
func crashChild(path string) {
	sync := session.SyncAlways
	if os.Getenv(crashSyncEnv) == "written" {
		sync = session.SyncWritten
	}
	s, err := session.OpenFile(path, session.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := 0; ; i++ {
		m := llm.UserText(strings.Repeat(fmt.Sprintf("entry %d ", i), 1+i%300), int64(i))
		e, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, sync)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		fmt.Println(e.ID)
	}
}

// TestCrashLoop kills a process that appends, again and again: what it
// appended with SyncAlways, or with SyncWritten, is in the file after
// every crash of the process.
func TestCrashLoop(t *testing.T) {
	if p := os.Getenv(crashEnv); p != "" {
		crashChild(p)
		return
	}
	if testing.Short() {
		t.Skip("crash loop skipped in -short mode")
	}
	for _, sync := range []string{"always", "written"} {
		t.Run(sync, func(t *testing.T) { crashLoop(t, sync) })
	}
}

func crashLoop(t *testing.T, sync string) {
	dir := t.TempDir()
	s, err := session.CreateFile(dir, session.Header{Cwd: dir}, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "off"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	durable := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	iterations := 0
	for ; iterations < 60 && time.Now().Before(deadline); iterations++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLoop$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path, crashSyncEnv+"="+sync)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		kill := time.After(time.Duration(5+r.IntN(40)) * time.Millisecond)
	read:
		for {
			select {
			case id, ok := <-lines:
				if !ok {
					break read
				}
				durable[id] = true
			case <-kill:
				_ = cmd.Process.Signal(syscall.SIGKILL)
				kill = nil
			}
		}
		werr := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("iteration %d: child ended with %v: %s", iterations, werr, stderr.String())
		}
		// A kill during write(2) rarely tears a line on a local disk; tear
		// one by hand every few rounds so the repair path runs too.
		if iterations%4 == 3 {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.WriteString(`{"type":"message","id":"torn","parentId":null,"timestamp":"2026-`)
			_ = f.Close()
		}
	}
	if iterations < 50 {
		t.Logf("only %d iterations before the time budget", iterations)
	}
	final, err := session.OpenFile(path, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer final.Close()
	for id := range durable {
		if _, ok := final.Tree().Get(id); !ok {
			t.Fatalf("durable entry %s lost after %d crashes", id, iterations)
		}
	}
	if rep := final.Report(); len(rep.SkippedLines) != 0 {
		t.Fatalf("damage in the middle after crashes: %+v", rep)
	}
	if _, err := os.Stat(path + ".broken"); err != nil {
		t.Fatalf("no .broken copy after torn tails: %v", err)
	}
	c, err := final.Tree().Context("")
	if err != nil || len(c.Messages) < len(durable) {
		t.Fatalf("context has %d messages for %d durable entries: %v", len(c.Messages), len(durable), err)
	}
	t.Logf("%d crashes, %d durable entries", iterations, len(durable))
	_ = filepath.Base(path)
}
