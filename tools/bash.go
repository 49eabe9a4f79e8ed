package tools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/tools/jail"
	"github.com/pibot/pibot/tools/sandbox"
)

const (
	// updateInterval throttles streamed bash updates, as in pi.
	updateInterval = 100 * time.Millisecond
	// exitGrace is how long output from background children is still read
	// after the shell exits, before its process group is killed.
	exitGrace = 100 * time.Millisecond
	// diskInterval is how often free space is checked against the disk
	// reserve while a call runs: a statfs, so cheap enough to do often.
	diskInterval = 10 * time.Millisecond
)

// Bash is pi's bash tool. Commands run in their own process group (and,
// with a jail, their own cgroup or PID namespace and limits), which is
// killed on abort, timeout and when the shell exits (background children
// included).
type Bash struct {
	ws         *Workspace
	sb         *sandbox.Sandbox
	jail       *jail.Jail // nil: no limits, process group only
	allowNet   bool
	env        []string
	shell      string
	defTimeout time.Duration
	outDir     *outputDir
	maxOutput  int64
	log        *slog.Logger
}

// Spec describes the tool; the description ends with the sandbox status
// and the limits in force.
func (t *Bash) Spec() llm.ToolSpec {
	s := loadSpec("bash")
	s.Description += " (" + isolation(t.sb, t.jail) + ")"
	return s
}

// isolation describes the sandbox and the jail in force.
func isolation(sb *sandbox.Sandbox, j *jail.Jail) string {
	if j == nil {
		return sb.Status() + "; no resource limits"
	}
	return sb.Status() + "; " + j.Status()
}

// DefaultEnv is the minimal environment bash gets when none is
// configured: PATH, HOME (the workspace), LANG and TERM=dumb.
func DefaultEnv(workspace string) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	return []string{"PATH=" + path, "HOME=" + workspace, "LANG=" + lang, "TERM=dumb"}
}

type bashArgs struct {
	Command *string  `json:"command"`
	Timeout *float64 `json:"timeout"`
}

// BashDetails is bash's details object when its output was truncated.
type BashDetails struct {
	Truncation     *Truncation `json:"truncation,omitempty"`
	FullOutputPath string      `json:"fullOutputPath,omitempty"`
}

func (t *Bash) shellPath() string {
	if t.shell != "" {
		return t.shell
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "sh"
}

// Execute runs the command.
func (t *Bash) Execute(ctx context.Context, _ string, raw json.RawMessage, update func(llm.ToolOutput)) (llm.ToolOutput, error) {
	var a bashArgs
	if err := decodeArgs("bash", raw, &a); err != nil {
		return llm.ToolOutput{}, err
	}
	if a.Command == nil {
		return llm.ToolOutput{}, missing("bash", "command")
	}
	cwd := t.ws.Root()
	if st, err := os.Stat(cwd); err != nil || !st.IsDir() {
		return llm.ToolOutput{}, failf("Working directory does not exist: %s\nCannot execute bash commands.", cwd)
	}
	var timeout time.Duration
	timeoutText := ""
	switch {
	case a.Timeout != nil && *a.Timeout > 0:
		timeout = time.Duration(*a.Timeout * float64(time.Second))
		timeoutText = jsNumber(*a.Timeout)
	case t.defTimeout > 0:
		timeout = t.defTimeout
		timeoutText = jsNumber(t.defTimeout.Seconds())
	}
	// Over the disk quota, the command still runs (it may delete files)
	// but cannot write any; without a jail it cannot be held to that.
	blocked := t.ws.quota.blocked()
	if blocked != "" && t.jail == nil {
		return llm.ToolOutput{}, failf("Refused: %s Commands cannot run until files are deleted.", blocked)
	}
	defer t.ws.quota.changed()
	out := newOutputBuffer(t.outDir, t.maxOutput)
	defer func() {
		if err := out.close(); err != nil {
			t.log.Warn("bash: close output file", "err", err)
		}
	}()
	if update != nil {
		update(llm.ToolOutput{Content: []llm.Content{}})
	}
	res, err := t.run(ctx, *a.Command, cwd, timeout, blocked != "", out, update)
	if err != nil {
		return llm.ToolOutput{}, err
	}
	out.finish()
	snap := out.snapshot()
	if update != nil {
		update(snapshotOutput(snap))
	}
	switch {
	case res.diskLow:
		text, _ := formatBash(snap, "")
		return llm.ToolOutput{}, &Error{Text: appendStatus(text, t.limitNote(res))}
	case res.aborted:
		text, _ := formatBash(snap, "")
		return llm.ToolOutput{}, &Error{Text: appendStatus(text, "Command aborted"), Err: context.Canceled}
	case res.timedOut:
		text, _ := formatBash(snap, "")
		status := "Command timed out after " + timeoutText + " seconds"
		if note := t.limitNote(res); note != "" {
			status += ". " + note
		}
		return llm.ToolOutput{}, &Error{Text: appendStatus(text, status), Err: context.DeadlineExceeded}
	}
	text, details := formatBash(snap, "(no output)")
	if blocked != "" {
		text = appendStatus(text, blocked+" This command ran with file writes blocked (deleting files works): delete files in the workspace to write again.")
	}
	if note := t.limitNote(res); note != "" {
		if res.code > 0 {
			note = "Command exited with code " + strconv.Itoa(res.code) + ". " + note
		}
		return llm.ToolOutput{}, &Error{Text: appendStatus(text, note)}
	}
	if res.code != 0 && res.code != -1 {
		return llm.ToolOutput{}, &Error{Text: appendStatus(text, "Command exited with code "+strconv.Itoa(res.code))}
	}
	if details == nil {
		return textOutput(text, nil), nil
	}
	return textOutput(text, *details), nil
}

func appendStatus(text, status string) string {
	if text == "" {
		return status
	}
	return text + "\n\n" + status
}

func snapshotOutput(s snapshot) llm.ToolOutput {
	d := BashDetails{FullOutputPath: s.fullPath}
	if s.truncation.Truncated {
		tr := s.truncation
		d.Truncation = &tr
	}
	return textOutput(s.content, d)
}

// formatBash renders the snapshot with pi's truncation notices.
func formatBash(s snapshot, empty string) (string, *BashDetails) {
	text := s.content
	if text == "" {
		text = empty
	}
	tr := s.truncation
	if !tr.Truncated {
		return text, nil
	}
	start := tr.TotalLines - tr.OutputLines + 1
	end := tr.TotalLines
	switch {
	case tr.LastLinePartial:
		text += "\n\n[Showing last " + formatSize(tr.OutputBytes) + " of line " + itoa(end) + " (line is " + formatSize(s.lastLine) + "). Full output: " + s.fullPath + "]"
	case *tr.TruncatedBy == "lines":
		text += "\n\n[Showing lines " + itoa(start) + "-" + itoa(end) + " of " + itoa(tr.TotalLines) + ". Full output: " + s.fullPath + "]"
	default:
		text += "\n\n[Showing lines " + itoa(start) + "-" + itoa(end) + " of " + itoa(tr.TotalLines) + " (" + formatSize(DefaultMaxBytes) + " limit). Full output: " + s.fullPath + "]"
	}
	return text, &BashDetails{Truncation: &tr, FullOutputPath: s.fullPath}
}

type runResult struct {
	code              int
	signal            syscall.Signal // the shell's killing signal, 0 if it exited
	aborted, timedOut bool
	noWrites          bool  // run with file writes blocked (over the disk quota)
	roomLeft          int64 // RLIMIT_FSIZE lowered to the room above the disk reserve; 0 if not
	diskLow           bool  // stopped: free space fell under the reserve
	events            jail.Events
}

// limitNote explains a limit the command ran into, or returns "".
func (t *Bash) limitNote(res runResult) string {
	var notes []string
	if res.diskLow {
		notes = append(notes, "Free space on the file system of the workspace or of pibot's data fell under the "+jail.FormatBytes(t.ws.quota.lim.DiskReserve)+
			" kept free for pibot's data (agent.limits.disk_reserve): the command was stopped. Delete files in the workspace first.")
	}
	if t.jail == nil {
		return strings.Join(notes, " ")
	}
	l := t.jail.Limits()
	if res.events.OOMKills > 0 {
		notes = append(notes, "The memory limit of "+jail.FormatBytes(l.Memory)+" (agent.limits.memory) was reached: the kernel killed a process of the command.")
	}
	if res.events.ForkFailures > 0 {
		notes = append(notes, processNote(l.Processes, res.events))
	}
	xfsz := res.code == 128+int(syscall.SIGXFSZ) || res.signal == syscall.SIGXFSZ
	if xfsz && res.roomLeft > 0 {
		notes = append(notes, "A file reached the "+jail.FormatBytes(res.roomLeft)+" of free space left above the "+
			jail.FormatBytes(t.ws.quota.lim.DiskReserve)+" kept free for pibot's data (agent.limits.disk_reserve): the process writing it was killed.")
	} else if l.FileSize > 0 && !res.noWrites && xfsz {
		notes = append(notes, "The file size limit of "+jail.FormatBytes(l.FileSize)+" (agent.limits.file_size) was reached: a process writing a larger file was killed.")
	}
	if l.CPUTime > 0 && (res.code == 128+int(syscall.SIGXCPU) || res.signal == syscall.SIGXCPU) {
		notes = append(notes, "The CPU time limit of "+l.CPUTime.String()+" per process (agent.limits.cpu_time) was reached: the process was killed.")
	}
	return strings.Join(notes, " ")
}

// processNote explains the process limit a command hit: agent.limits.processes
// (configured), or the smaller budget pibot's cgroup leaves the tools.
func processNote(configured int, ev jail.Events) string {
	b := ev.Budget
	if b.Host > 0 && (configured == 0 || ev.Processes < configured) {
		note := "The process limit of " + itoa(ev.Processes) + " was reached: starting more processes or threads failed. " +
			"It is what pibot's cgroup, which may hold " + itoa(b.Host) + " tasks, leaves all tool calls together, " + itoa(b.Reserve) + " kept free for pibot"
		if configured > 0 {
			note += "; agent.limits.processes is " + itoa(configured)
		}
		return note + "."
	}
	return "The process limit of " + itoa(configured) + " (agent.limits.processes) was reached: starting more processes or threads failed."
}

// fileSize is the RLIMIT_FSIZE of a call when it must be lower than
// agent.limits.file_size: 0 when files may not grow at all, else the free
// space above the disk reserve when that is less.
func (t *Bash) fileSize(noWrites bool) (int64, bool) {
	if noWrites {
		return 0, true
	}
	q := t.ws.quota
	if q.lim.DiskReserve <= 0 {
		return 0, false
	}
	free, ok := q.free()
	if !ok {
		return 0, false
	}
	room := free - q.lim.DiskReserve
	if l := t.jail.Limits().FileSize; l > 0 && l <= room {
		return 0, false
	}
	return max(room, 0), true
}

// run starts the command in its own process group, streams its merged
// output into out and kills the whole group when the context ends, the
// timeout fires or the shell exits.
func (t *Bash) run(ctx context.Context, command, cwd string, timeout time.Duration, noWrites bool, out *outputBuffer, update func(llm.ToolOutput)) (runResult, error) {
	argv := t.sb.Wrap([]string{t.shellPath(), "-c", command}, t.ws.Root(), cwd, t.allowNet, t.ws.sandboxMounts()...)
	var jc *jail.Cmd
	var cmd *exec.Cmd
	var room int64
	if t.jail != nil {
		var err error
		if fileSize, lowered := t.fileSize(noWrites); lowered {
			jc, err = t.jail.CommandFileSize(argv, fileSize)
			if !noWrites {
				room = fileSize
			}
		} else {
			jc, err = t.jail.Command(argv)
		}
		if err != nil {
			return runResult{}, &Error{Text: "Cannot start shell: " + err.Error(), Err: err}
		}
		cmd = jc.Cmd
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		if jc != nil {
			jc.Close()
		}
		return runResult{}, &Error{Text: "Cannot create pipe: " + err.Error(), Err: err}
	}
	cmd.Dir = cwd
	cmd.Env = t.env
	cmd.Stdout, cmd.Stderr = pw, pw
	if jc != nil {
		err = jc.Start()
	} else {
		err = cmd.Start()
	}
	pw.Close()
	if err != nil {
		pr.Close()
		if jc != nil {
			jc.Close()
		}
		return runResult{}, &Error{Text: "Cannot start shell: " + err.Error(), Err: err}
	}
	pid := cmd.Process.Pid
	killAll := func() {
		if jc != nil {
			jc.Kill()
		} else {
			killGroup(pid)
		}
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 64*1024)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				out.Write(buf[:n]) //nolint:errcheck // never fails
			}
			if err != nil {
				return
			}
		}
	}()
	waitDone := make(chan error, 1)
	go func() { waitDone <- cmd.Wait() }()

	var timer <-chan time.Time
	if timeout > 0 {
		tm := time.NewTimer(timeout)
		defer tm.Stop()
		timer = tm.C
	}
	tick := time.NewTicker(updateInterval)
	defer tick.Stop()
	// Free space is watched while the call may write and a reserve is
	// kept (a call that started blocked cannot write: it may run on).
	var disk <-chan time.Time
	if !noWrites && t.ws.quota.lim.DiskReserve > 0 {
		dt := time.NewTicker(diskInterval)
		defer dt.Stop()
		disk = dt.C
	}
	res := runResult{noWrites: noWrites, roomLeft: room}
	lastBytes := -1
	done := ctx.Done()
	for waiting := true; waiting; {
		select {
		case <-waitDone:
			waiting = false
		case <-done:
			res.aborted = true
			done = nil
			killAll()
		case <-timer:
			res.timedOut = true
			timer = nil
			killAll()
		case <-disk:
			if t.ws.quota.lowSpace() {
				res.diskLow = true
				disk = nil
				killAll()
			}
		case <-tick.C:
			if update == nil {
				continue
			}
			out.mu.Lock()
			n := out.rawBytes
			out.mu.Unlock()
			if n != lastBytes {
				lastBytes = n
				update(snapshotOutput(out.snapshot()))
			}
		}
	}
	// The shell is gone; give background writers a moment, then kill
	// whatever is left of the group (with a jail: of the cgroup or PID
	// namespace) and stop reading.
	select {
	case <-readDone:
	case <-time.After(exitGrace):
	}
	killAll()
	select {
	case <-readDone:
	case <-time.After(time.Second):
		pr.Close() // a process that left the group still holds the pipe
		<-readDone
	}
	pr.Close()
	if jc != nil {
		res.events = jc.Close()
	}
	res.code = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.signal = ws.Signal()
	}
	if ctx.Err() != nil && !res.timedOut {
		res.aborted = true
	}
	// bwrap exits 1 with "bwrap: …" when it cannot create the sandbox. The
	// output is untrusted, so it only asks for a real probe; one that
	// fails (the sandbox was decided from a stale probe cache) is the
	// call's error, not the command's output.
	if res.code == 1 && !res.aborted && !res.timedOut && out.startsWith("bwrap: ") {
		if err := t.sb.Recheck(ctx); err != nil {
			return runResult{}, &Error{Text: "Cannot start the sandbox: " + err.Error(), Err: err}
		}
	}
	return res, nil
}

// killGroup SIGKILLs the process group repeatedly until it is gone (or
// only zombies waiting for their reaper are left), so processes forked
// while it is being killed (a fork bomb) die too.
func killGroup(pgid int) {
	for i := 0; i < 20; i++ {
		err := syscall.Kill(-pgid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
