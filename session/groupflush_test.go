package session

import (
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestGroupFlushArmsOnceAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		g := groupFlush{window: time.Second, flush: func() { n.Add(1) }}
		g.schedule()
		g.schedule() // already armed
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Fatalf("%d flushes for two schedules within a window, want 1", got)
		}
		g.schedule()
		g.stop() // cancels the armed flush
		g.schedule()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Fatalf("%d flushes after stop, want still 1", got)
		}
	})
}

func TestGroupFlushStopWaitsForARunningFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var done atomic.Bool
		g := groupFlush{window: time.Millisecond, flush: func() { <-release; done.Store(true) }}
		g.schedule()
		time.Sleep(10 * time.Millisecond) // the flush runs and blocks
		stopped := make(chan struct{})
		go func() { g.stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while a flush was running")
		default:
		}
		close(release)
		<-stopped
		if !done.Load() {
			t.Fatal("the running flush did not finish")
		}
	})
}

// TestIdleSessionsHoldNoGoroutine: loaded sessions with nothing to flush
// cost no goroutine.
func TestIdleSessionsHoldNoGoroutine(t *testing.T) {
	st := NewMemStorage()
	before := runtime.NumGoroutine()
	var ss []*Session
	for range 50 {
		s, err := Create(st, "/idle", Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines for 50 idle sessions", after-before)
	}
	for _, s := range ss {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
