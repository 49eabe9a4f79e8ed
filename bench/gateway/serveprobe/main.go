// Command serveprobe measures how fast `pibot serve` becomes ready and how
// much memory it holds while idle, for bench/gateway/rss.sh.
//
// Each run starts the binary with no configuration file in an empty
// temporary directory (the working directory and HOME, no API keys in the
// environment) on a free loopback port, and records the time from exec to
// the "pibot ready" line on stdout, to the first 200 from /readyz and to
// the first 200 from the web chat's event stream (the chat works). After
// an idle pause it reads VmRSS from /proc/PID/status; then it sends one
// web chat message and reads VmRSS again after another pause, and stops
// the process with SIGTERM. It prints every run and the medians.
//
// Usage:
//
//	serveprobe -bin ./pibot [-runs 5] [-idle 2s]
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sample is what one run measured.
type sample struct {
	readyLine time.Duration // exec → "pibot ready" on stdout
	readyz    time.Duration // exec → first 200 from /readyz
	web       time.Duration // exec → first 200 from the web chat's /api/events
	rssKB     int64         // VmRSS after the idle pause
	anonKB    int64         // RssAnon: heap, stacks, runtime
	fileKB    int64         // RssFile: the binary's mapped pages
	msgKB     int64         // VmRSS after one web chat message and another idle pause
}

func main() {
	bin := flag.String("bin", "", "pibot `binary` to probe")
	runs := flag.Int("runs", 5, "number of runs")
	idle := flag.Duration("idle", 2*time.Second, "idle pause before reading VmRSS")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "serveprobe: -bin is required")
		os.Exit(2)
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "serveprobe:", err)
		os.Exit(1)
	}
	var all []sample
	for i := range *runs {
		s, err := probe(abs, *idle)
		if err != nil {
			fmt.Fprintf(os.Stderr, "serveprobe: run %d: %v\n", i+1, err)
			os.Exit(1)
		}
		fmt.Printf("run %d: ready line %6.1f ms  /readyz %6.1f ms  web chat %6.1f ms  idle VmRSS %5.1f MiB (anon %4.1f, file %4.1f), after a message %5.1f MiB\n",
			i+1, msec(s.readyLine), msec(s.readyz), msec(s.web), mb(s.rssKB), mb(s.anonKB), mb(s.fileKB), mb(s.msgKB))
		all = append(all, s)
	}
	line := median(all, func(s sample) float64 { return msec(s.readyLine) })
	rz := median(all, func(s sample) float64 { return msec(s.readyz) })
	web := median(all, func(s sample) float64 { return msec(s.web) })
	rss := median(all, func(s sample) float64 { return mb(s.rssKB) })
	msg := median(all, func(s sample) float64 { return mb(s.msgKB) })
	fmt.Printf("median of %d: ready line %.1f ms, /readyz %.1f ms, web chat %.1f ms, idle VmRSS %.1f MiB, after a message %.1f MiB\n", len(all), line, rz, web, rss, msg)
	// Issue #15's goals (#5 asked for < 25 MiB and < 200 ms).
	fmt.Printf("goal: idle RSS <= 20 MiB: %s (PicoClaw's gateway idles at ~32 MB)\n", verdict(rss <= 20))
	fmt.Printf("goal: ready < 100 ms:     %s (/readyz), %s (web chat usable)\n", verdict(rz < 100), verdict(web < 100))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func msec(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mb(kb int64) float64 { return float64(kb) / 1024 }

func median(all []sample, f func(sample) float64) float64 {
	v := make([]float64, len(all))
	for i, s := range all {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

// probe runs the binary once.
func probe(bin string, idle time.Duration) (sample, error) {
	var s sample
	dir, err := os.MkdirTemp("", "serveprobe-")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return s, err
	}
	cmd := exec.Command(bin, "serve", "--listen", addr)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return s, err
	}
	cmd.Stderr = io.Discard
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return s, err
	}
	exited := make(chan error, 1)
	lineAt := make(chan time.Duration, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "pibot ready") {
				lineAt <- time.Since(start)
				sent = true
			}
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if s.readyz, err = pollReady(ctx, "http://"+addr+"/readyz", start, exited); err != nil {
		return s, err
	}
	// /readyz may answer before the gateway has started the web chat.
	if s.web, err = pollReady(ctx, "http://"+addr+"/api/events?conv=probe", start, exited); err != nil {
		return s, err
	}
	select {
	case s.readyLine = <-lineAt:
	case <-ctx.Done():
		return s, errors.New("no \"pibot ready\" line on stdout")
	}
	time.Sleep(idle)
	if s.rssKB, s.anonKB, s.fileKB, err = vmRSS(cmd.Process.Pid); err != nil {
		return s, err
	}
	// One chat message (with no model configured the gateway answers how
	// to set one) runs the inbox, the session store and the reply path.
	body := strings.NewReader(`{"conv":"probe","id":"m1","text":"hello"}`)
	resp, err := http.Post("http://"+addr+"/api/send", "application/json", body)
	if err != nil {
		return s, fmt.Errorf("send a message: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return s, fmt.Errorf("send a message: %s", resp.Status)
	}
	time.Sleep(idle)
	if s.msgKB, _, _, err = vmRSS(cmd.Process.Pid); err != nil {
		return s, err
	}
	return s, nil
}

// pollReady polls url every millisecond until it answers 200.
func pollReady(ctx context.Context, url string, start time.Time, exited <-chan error) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		if resp, err := client.Do(req); err == nil {
			at := time.Since(start)
			ok := resp.StatusCode == http.StatusOK
			if !ok {
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			// An event stream never ends: do not read it.
			resp.Body.Close()
			if ok {
				return at, nil
			}
		}
		select {
		case err := <-exited:
			return 0, fmt.Errorf("pibot exited before it was ready: %v", err)
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: not ready: %w", url, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// vmRSS reads VmRSS, RssAnon and RssFile (KB) from /proc/PID/status.
func vmRSS(pid int) (rss, anon, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	fields := map[string]*int64{"VmRSS:": &rss, "RssAnon:": &anon, "RssFile:": &file}
	found := false
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || fields[f[0]] == nil {
			continue
		}
		if *fields[f[0]], err = strconv.ParseInt(f[1], 10, 64); err != nil {
			return 0, 0, 0, err
		}
		found = found || f[0] == "VmRSS:"
	}
	if !found {
		return 0, 0, 0, errors.New("no VmRSS in /proc status")
	}
	return rss, anon, file, nil
}
