// Package doctor checks that a deployment of pibot can work: credentials
// against their platforms and model providers, Redis, the data directory
// and anything else given as a Check. Every check runs at once under its
// own deadline and yields one Finding; Report prints one line per finding
// with what to fix, and says whether anything is wrong.
//
// doctor knows no other pibot package: cmd/pibot turns a configuration
// into checks. Credentials never appear in findings: errors of the HTTP
// client, which name the URL (Telegram's carries the token), are reduced
// to their cause.
package doctor

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Status is a finding's severity.
type Status int

// Statuses, from good to bad.
const (
	OK   Status = iota // the check passed
	Warn               // works, but not as it should (an unsandboxed bash)
	Fail               // pibot cannot work this way
)

func (s Status) String() string {
	switch s {
	case OK:
		return "ok"
	case Warn:
		return "WARN"
	}
	return "FAIL"
}

// Finding is the outcome of one check.
type Finding struct {
	// Check names what was checked ("telegram", "provider openai").
	Check  string
	Status Status
	// Detail says what was found: the bot's name, the number of models,
	// or the problem.
	Detail string
	// Fix says what to change, for a warning or a failure.
	Fix string
}

// Check is one named check. Run gets a context with the check's deadline.
type Check struct {
	Name string
	Run  func(ctx context.Context) Finding
}

// DefaultTimeout bounds one check.
const DefaultTimeout = 10 * time.Second

// Run runs every check concurrently, each within timeout (DefaultTimeout
// when zero), and returns the findings in the order of checks. A check
// that overruns its deadline fails.
func Run(ctx context.Context, checks []Check, timeout time.Duration) []Finding {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	out := make([]Finding, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			done := make(chan Finding, 1)
			go func() { done <- c.Run(cctx) }()
			select {
			case f := <-done:
				if f.Check == "" {
					f.Check = c.Name
				}
				out[i] = f
			case <-cctx.Done():
				// The check's goroutine ends once it sees cctx (done is
				// buffered, so it never blocks).
				out[i] = Finding{Check: c.Name, Status: Fail, Detail: fmt.Sprintf("no answer within %s", timeout),
					Fix: "check the network path to it"}
			}
		})
	}
	wg.Wait()
	return out
}

// Report writes one line per finding and a summary, and returns the
// number of failures and warnings.
func Report(w io.Writer, findings []Finding) (fails, warns int) {
	width := 0
	for _, f := range findings {
		width = max(width, len(f.Check))
	}
	for _, f := range findings {
		line := fmt.Sprintf("%-4s  %-*s  %s", f.Status, width, f.Check, f.Detail)
		if f.Status != OK && f.Fix != "" {
			line += ": " + f.Fix
		}
		fmt.Fprintln(w, line)
		switch f.Status {
		case Fail:
			fails++
		case Warn:
			warns++
		}
	}
	switch {
	case fails > 0:
		fmt.Fprintf(w, "%d problem(s), %d warning(s): fix the lines marked FAIL\n", fails, warns)
	case warns > 0:
		fmt.Fprintf(w, "no problems, %d warning(s)\n", warns)
	default:
		fmt.Fprintln(w, "everything looks right")
	}
	return fails, warns
}

// okf, warnf and failf build findings.
func okf(check, format string, args ...any) Finding {
	return Finding{Check: check, Status: OK, Detail: fmt.Sprintf(format, args...)}
}

func failf(check, fix, format string, args ...any) Finding {
	return Finding{Check: check, Status: Fail, Detail: fmt.Sprintf(format, args...), Fix: fix}
}
