package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/gateway"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/providers/faux"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

// longSessionLater is how many messages follow the first one after an
// eviction, for the later messages' CPU and allocation.
const longSessionLater = 10

// longSessionWait is how long a message may take to reach the model.
const longSessionWait = 5 * time.Minute

// BenchmarkLongSession is issue #34's first table: the first message
// into a conversation whose session file already holds 1k, 10k or 100k
// entries (sessiontest.GenerateWith, without compactions or with one every
// 1,000 entries), after the gateway starts and after it evicted the idle
// session, then later messages. One op starts a gateway on the data
// directory, sends the first message, waits for the eviction, sends one
// more and then longSessionLater more, and stops the gateway.
//
// Reported: saved-index-MiB, the size of the index the first start's
// stop saved; cold-ms, first-ms and evicted-ms, from the inbound message
// to the provider request (the session is loaded on the way: with no
// index saved, at the first start of all; from the index the previous
// stop saved, after a start; from the index kept in memory, after the
// eviction); first-MB and
// evicted-MB, the bytes allocated meanwhile; first-rss-MiB and
// evicted-rss-MiB, the process's peak resident set during that message
// above its resident set before it (after the heap was returned to the
// system); idle-heap-MiB, the live heap once the session was evicted
// above the live heap before the gateway started (what an evicted
// session keeps: its index, see session.Indexes); later-us/msg and later-KB/msg, CPU time (user and system) and
// bytes allocated per later message, from the inbound message to the end
// of the reply's stream (the fake model's share included; it streams a
// short answer and encodes nothing of the request).
func BenchmarkLongSession(b *testing.B) {
	benchLongSessions(b, []int{-1, 1000}, 1000, 10000, 100000)
}

// BenchmarkMillionEntrySession is BenchmarkLongSession at 1,000,000
// entries with a compaction every 1,000 (a 1.7 GB file; run it with
// -benchtime 1x; without compactions each message's context is the whole
// file). Its name does not match -bench LongSession.
func BenchmarkMillionEntrySession(b *testing.B) {
	benchLongSessions(b, []int{1000}, 1000000)
}

func benchLongSessions(b *testing.B, everys []int, sizes ...int) {
	for _, n := range sizes {
		for _, every := range everys {
			c := struct {
				name  string
				every int
			}{"none", every}
			if every > 0 {
				c.name = fmt.Sprintf("every%d", every)
			}
			b.Run(fmt.Sprintf("entries=%dk/compactions=%s", n/1000, c.name), func(b *testing.B) {
				benchLongSession(b, n, c.every)
			})
		}
	}
}

func benchLongSession(b *testing.B, n, every int) {
	dir := b.TempDir()
	ad := newDiscardAdapter()
	conv := benchMessage(ad.Platform(), 0, 0, "").Conv
	writeLongSession(b, filepath.Join(dir, "sessions", "long.jsonl"), n, every, conv.Key())
	// With its usage given, faux does not encode the whole request to
	// estimate it: the later messages' figures are the gateway's.
	model := newStampModel(faux.Text("ok, noted.").WithUsage(llm.Usage{Input: 100, Output: 3, TotalTokens: 103}))
	var first, evicted, firstAlloc, evictedAlloc, firstRSS, evictedRSS, keptHeap, laterCPU, laterAlloc float64
	seq := 0
	send := func(ad *discardAdapter) (toRequest time.Duration, allocated uint64) {
		seq++
		text := fmt.Sprintf("message %d", seq)
		w := model.expect(text)
		a0 := totalAlloc()
		t0 := time.Now()
		if err := ad.inject(b.Context(), benchMessage(ad.Platform(), 0, seq, text)); err != nil {
			b.Fatal(err)
		}
		var at time.Time
		select {
		case at = <-w.started:
		case <-time.After(longSessionWait):
			b.Fatalf("no provider request for %q", text)
		}
		<-w.ended
		return at.Sub(t0), totalAlloc() - a0
	}
	// The first start rebuilds the location index from the file, and its
	// first message loads the session with no index saved (cold-ms); its
	// stop saves the session's index, which the later starts read.
	bg := startLongGateway(b, dir, ad, model)
	cold, _ := send(ad)
	if err := bg.stop(); err != nil {
		b.Fatal(err)
	}
	savedIndex := func() float64 {
		saved, _ := filepath.Glob(filepath.Join(dir, "index", "*.idx"))
		if len(saved) != 1 {
			return 0
		}
		fi, err := os.Stat(saved[0])
		if err != nil {
			return 0
		}
		return float64(fi.Size()) / (1 << 20)
	}
	saved := savedIndex()
	b.ResetTimer()
	for range b.N {
		ad := newDiscardAdapter()
		heap0 := liveHeap()
		base := settleRSS(b)
		bg := startLongGateway(b, dir, ad, model)
		d, a := send(ad)
		if savedIndex() == 0 { // a saved index that does not match is removed
			b.Fatal("the saved index was not used")
		}
		firstRSS += peakRSS(b) - base
		first += ms(d)
		firstAlloc += float64(a)
		bg.waitMetric(b, "pibot_run_seconds", time.Minute, func(v float64) bool { return v >= 1 })
		bg.waitMetric(b, "pibot_session_owners", time.Minute, func(v float64) bool { return v == 0 })
		keptHeap += float64(liveHeap()) - float64(heap0)

		base = settleRSS(b)
		d, a = send(ad)
		evictedRSS += peakRSS(b) - base
		evicted += ms(d)
		evictedAlloc += float64(a)

		u0, s0 := cpuTime(b)
		a0 := totalAlloc()
		for range longSessionLater {
			send(ad)
		}
		u1, s1 := cpuTime(b)
		laterCPU += float64(u1-u0+s1-s0) / float64(time.Microsecond) / longSessionLater
		laterAlloc += float64(totalAlloc()-a0) / 1e3 / longSessionLater
		if err := bg.stop(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	N := float64(b.N)
	b.ReportMetric(ms(cold), "cold-ms")
	b.ReportMetric(saved, "saved-index-MiB")
	b.ReportMetric(first/N, "first-ms")
	b.ReportMetric(firstAlloc/N/1e6, "first-MB")
	b.ReportMetric(firstRSS/N, "first-rss-MiB")
	b.ReportMetric(evicted/N, "evicted-ms")
	b.ReportMetric(evictedAlloc/N/1e6, "evicted-MB")
	b.ReportMetric(evictedRSS/N, "evicted-rss-MiB")
	b.ReportMetric(keptHeap/N/(1<<20), "idle-heap-MiB")
	b.ReportMetric(laterCPU/N, "later-us/msg")
	b.ReportMetric(laterAlloc/N, "later-KB/msg")
}

// writeLongSession writes a generated session of n entries at path and
// ends its main branch with an answer at location loc, whose head it is.
func writeLongSession(tb testing.TB, path string, n, every int, loc string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := sessiontest.GenerateWith(f, n, 1, sessiontest.GenOptions{CompactEvery: every}); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	s, err := session.OpenFile(path, session.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	// The conversation goes on with the benchmark's model.
	mc, err := s.Append(session.Entry{Type: session.TypeModelChange, ParentID: s.Tree().Leaf(), Provider: "faux", ModelID: "m"}, session.SyncGrouped)
	if err != nil {
		tb.Fatal(err)
	}
	m := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("Noted.")}, API: faux.API, Provider: "faux", Model: "m", StopReason: llm.StopStop, Timestamp: time.Now().UnixMilli()}
	if _, err := s.Append(session.Entry{Type: session.TypeMessage, ParentID: mc.ID, Message: &m, Pibot: &session.Meta{Loc: loc}}, session.SyncAlways); err != nil {
		tb.Fatal(err)
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
}

// startLongGateway runs a gateway on the data directory dir, evicting
// sessions idle for a second.
func startLongGateway(tb testing.TB, dir string, ad chat.Adapter, m llm.Model) *benchGateway {
	tb.Helper()
	g, reg, inbox := newLongGateway(tb, dir, ad, m, func(c *gateway.Config) { c.IdleEvict = time.Second })
	return runBenchGateway(tb, g, reg, inbox.Len, func() { inbox.Close() })
}

// newLongGateway builds a gateway on the data directory dir (its
// configuration changed by mod), its metrics in the registry it returns,
// its messages in the inbox it returns (the caller closes it).
func newLongGateway(tb testing.TB, dir string, ad chat.Adapter, m llm.Model, mod func(*gateway.Config)) (*gateway.Gateway, *prometheus.Registry, *cluster.LocalInbox) {
	tb.Helper()
	inbox, err := cluster.OpenInbox(filepath.Join(dir, "inbox.jsonl"))
	if err != nil {
		tb.Fatal(err)
	}
	locker, err := cluster.NewLocker(dir)
	if err != nil {
		tb.Fatal(err)
	}
	store, err := access.OpenStore(filepath.Join(dir, "pairing.json"))
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := benchConfig(dir, reg)
	mod(&cfg)
	policy := access.Policy{Owners: []string{string(ad.Platform()) + ":owner"}, DMPolicy: "pairing"}
	g, err := gateway.New(cfg, gateway.Deps{
		Adapters: []chat.Adapter{ad},
		Models:   models{m},
		Access:   access.NewChecker(policy, store),
		Inbox:    inbox,
		Dedupe:   cluster.NewDedupe(time.Hour, 1000),
		Locker:   locker,
	})
	if err != nil {
		inbox.Close()
		tb.Fatal(err)
	}
	return g, reg, inbox
}

// liveHeap is the bytes of live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// totalAlloc is the bytes allocated on the heap so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// settleRSS returns the heap to the system, resets the process's peak
// resident set (Linux: clear_refs 5) and returns the resident set in MiB.
func settleRSS(tb testing.TB) float64 {
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Skipf("cannot reset the peak resident set: %v", err)
	}
	return procStatus(tb, "VmRSS")
}

// peakRSS is the process's peak resident set in MiB since settleRSS.
func peakRSS(tb testing.TB) float64 { return procStatus(tb, "VmHWM") }

// procStatus is the field name of /proc/self/status in MiB.
func procStatus(tb testing.TB, name string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			tb.Fatal(err)
		}
		return kb / 1024
	}
	tb.Fatalf("no %s in /proc/self/status", name)
	return 0
}
