// Command ctx times pibot's session load + context for the benchmark
// script: ctx FILE opens FILE read-only, builds the default-leaf context
// and prints the timings and message count as JSON. With -appends N it
// instead creates a session in the file's directory and appends N entries
// with grouped fsync, then flushes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
)

func main() {
	appends := flag.Int("appends", 0, "append N entries with grouped fsync instead of loading")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: ctx [-appends N] FILE|DIR")
		os.Exit(2)
	}
	var err error
	if *appends > 0 {
		err = runAppends(flag.Arg(0), *appends)
	} else {
		err = runLoad(flag.Arg(0))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctx:", err)
		os.Exit(1)
	}
}

func runLoad(path string) error {
	t0 := time.Now()
	s, err := session.OpenFile(path, session.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	t1 := time.Now()
	c, err := s.Tree().Context("")
	if err != nil {
		return err
	}
	t2 := time.Now()
	return json.NewEncoder(os.Stdout).Encode(map[string]any{
		"impl": "pibot", "entries": s.Tree().Len(), "messages": len(c.Messages),
		"loadMs": ms(t1.Sub(t0)), "contextMs": ms(t2.Sub(t1)), "totalMs": ms(t2.Sub(t0)),
	})
}

func runAppends(dir string, n int) error {
	s, err := session.CreateFile(filepath.Join(dir, "pibot-appends"), session.Header{Cwd: dir}, session.Entry{Type: session.TypeThinkingLevelChange, ThinkingLevel: "off"}, session.Options{})
	if err != nil {
		return err
	}
	t0 := time.Now()
	parent := s.Tree().Leaf()
	for i := range n {
		m := llm.UserText(fmt.Sprintf("benchmark message %d with a little text in it", i), time.Now().UnixMilli())
		e, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: parent}, session.SyncGrouped)
		if err != nil {
			return err
		}
		parent = e.ID
	}
	if err := s.Flush(); err != nil {
		return err
	}
	d := time.Since(t0)
	if err := s.Close(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"impl": "pibot", "appends": n, "totalMs": ms(d), "fsync": "grouped"})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
