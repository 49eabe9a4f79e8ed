package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/gateway/schedule"
)

// recorder collects firings with the fake clock's time.
type recorder struct {
	mu    sync.Mutex
	fired []string // "ID@2000-01-03T09:00 (due ...)"
	at    []time.Time
}

func (r *recorder) fire(_ context.Context, f schedule.Firing) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fired = append(r.fired, f.Schedule.Prompt)
	r.at = append(r.at, time.Now())
	return nil
}

func (r *recorder) times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at...)
}

// start runs a scheduler over path until the returned stop is called.
func start(t *testing.T, path string, r *recorder) (*schedule.Scheduler, func()) {
	t.Helper()
	s, err := schedule.Open(schedule.Options{Path: path, Fire: r.fire})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	return s, func() { cancel(); <-done }
}

// The bubble's clock starts at 2000-01-01 00:00 UTC, a Saturday.
func TestCronFiresOnWeekdays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		r := &recorder{}
		s, stop := start(t, path, r)
		defer stop()
		if _, err := s.Add(schedule.Schedule{Cron: "0 9 * * 1-5", TZ: "UTC", Location: "loc1", Creator: "test:alice", Prompt: "standup"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(7 * 24 * time.Hour) // Saturday to Saturday
		synctest.Wait()
		got := r.times()
		if len(got) != 5 {
			t.Fatalf("fired %d times in a week, want 5 (weekdays): %v", len(got), got)
		}
		for i, at := range got {
			want := time.Date(2000, 1, 3+i, 9, 0, 0, 0, time.UTC) // Monday 3rd .. Friday 7th
			if !at.Equal(want) {
				t.Errorf("firing %d at %v, want %v", i, at.UTC(), want)
			}
		}
		list := s.List("loc1")
		if len(list) != 1 || !list[0].Next.Equal(time.Date(2000, 1, 10, 9, 0, 0, 0, time.UTC)) {
			t.Errorf("after a week: %+v, want next Monday 09:00", list)
		}
	})
}

func TestOneShotFiresOnceAndIsRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		r := &recorder{}
		s, stop := start(t, path, r)
		defer stop()
		req, err := schedule.Parse("in 2h check the deploy", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if _, err := s.Add(schedule.Schedule{At: req.At, Location: "loc1", Creator: "test:alice", Prompt: req.Prompt}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if len(r.times()) != 0 {
			t.Fatal("fired early")
		}
		time.Sleep(5 * time.Hour)
		synctest.Wait()
		got := r.times()
		if len(got) != 1 || !got[0].Equal(t0.Add(2*time.Hour)) || r.fired[0] != "check the deploy" {
			t.Fatalf("firings %v %v, want one at +2h", got, r.fired)
		}
		if l := s.List(""); len(l) != 0 {
			t.Errorf("one-shot still listed: %+v", l)
		}
	})
}

// pibot is down for five days: the daily schedule fires once at start,
// then at its next occurrence.
func TestRestartCatchUpFiresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		r := &recorder{}
		s, stop := start(t, path, r)
		if _, err := s.Add(schedule.Schedule{Cron: "30 8 * * *", TZ: "UTC", Location: "loc1", Creator: "test:alice", Prompt: "daily"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Hour) // past Saturday 08:30
		synctest.Wait()
		stop()
		if n := len(r.times()); n != 1 {
			t.Fatalf("fired %d times before the stop, want 1", n)
		}
		time.Sleep(5 * 24 * time.Hour) // down: five occurrences missed
		restart := time.Now()
		r2 := &recorder{}
		s2, stop2 := start(t, path, r2)
		defer stop2()
		synctest.Wait()
		got := r2.times()
		if len(got) != 1 || !got[0].Equal(restart) {
			t.Fatalf("after restart fired at %v, want once at start (%v)", got, restart)
		}
		next := time.Date(2000, 1, 7, 8, 30, 0, 0, time.UTC)
		if l := s2.List(""); len(l) != 1 || !l[0].Next.Equal(next) {
			t.Fatalf("next = %+v, want %v", l, next)
		}
		time.Sleep(time.Until(next) + time.Minute)
		synctest.Wait()
		if got := r2.times(); len(got) != 2 || !got[1].Equal(next) {
			t.Fatalf("firings after restart %v, want the next one at %v", got, next)
		}
	})
}

func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		r := &recorder{}
		s, stop := start(t, path, r)
		defer stop()
		sc, err := s.Add(schedule.Schedule{At: time.Now().Add(time.Hour), Location: "loc1", Creator: "test:alice", Prompt: "ping"})
		if err != nil {
			t.Fatal(err)
		}
		notYours := func(x schedule.Schedule) error {
			if x.Creator != "test:bob" {
				return os.ErrPermission
			}
			return nil
		}
		if err := s.Cancel(sc.ID, notYours); err == nil {
			t.Fatal("bob cancelled alice's schedule")
		}
		if err := s.Cancel("nope", nil); err != schedule.ErrNotFound {
			t.Fatalf("cancel unknown = %v", err)
		}
		if err := s.Cancel(sc.ID, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if len(r.times()) != 0 {
			t.Fatal("a cancelled schedule fired")
		}
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), sc.ID) {
			t.Errorf("cancelled schedule still stored: %s", b)
		}
	})
}

// Schedules survive a restart (the file), and config schedules are
// replaced by the next configuration.
func TestDurableAndConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		s, err := schedule.Open(schedule.Options{Path: path, Fire: (&recorder{}).fire})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Add(schedule.Schedule{Cron: "@daily", TZ: "UTC", Location: "a", Creator: "u", Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetConfig([]schedule.Schedule{{ID: "cfg-x", Cron: "0 * * * *", TZ: "UTC", Location: "b", Creator: "u", Prompt: "hourly"}}); err != nil {
			t.Fatal(err)
		}
		s2, err := schedule.Open(schedule.Options{Path: path, Fire: (&recorder{}).fire})
		if err != nil {
			t.Fatal(err)
		}
		if l := s2.List(""); len(l) != 2 {
			t.Fatalf("reopened: %+v", l)
		}
		if err := s2.SetConfig(nil); err != nil {
			t.Fatal(err)
		}
		if l := s2.List(""); len(l) != 1 || l[0].Config {
			t.Fatalf("after removing the config schedule: %+v", l)
		}
		if _, err := schedule.Open(schedule.Options{Path: writeBad(t)}); err == nil {
			t.Error("a corrupt file was accepted")
		}
	})
}

func writeBad(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		in, cron, prompt string
		at               time.Time
		err              string
	}{
		{in: "every weekday 09:00 summarise yesterday's commits", cron: "0 9 * * 1-5", prompt: "summarise yesterday's commits"},
		{in: "every day 18:30 wrap up", cron: "30 18 * * *", prompt: "wrap up"},
		{in: "every monday 08:05 plan", cron: "5 8 * * 1", prompt: "plan"},
		{in: "every weekend 10:00 relax", cron: "0 10 * * 0,6", prompt: "relax"},
		{in: "every 2h check", cron: "@every 2h0m0s", prompt: "check"},
		{in: `cron "0 9 1 * *" monthly report`, cron: "0 9 1 * *", prompt: "monthly report"},
		{in: "in 2h check the deploy", at: now.Add(2 * time.Hour), prompt: "check the deploy"},
		{in: "in 1d tomorrow", at: now.Add(24 * time.Hour), prompt: "tomorrow"},
		{in: "in 2h", err: "prompt is missing"},
		{in: "in soon x", err: "not a duration"},
		{in: "every fortnight 09:00 x", err: "not day, weekday"},
		{in: "every day 25:00 x", err: "not a time"},
		{in: "every 10s x", err: "too often"},
		{in: `cron "61 * * * *" x`, err: "cron"},
		{in: "whenever x", err: "want one of"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := schedule.Parse(tt.in, now)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || r.Cron != tt.cron || !r.At.Equal(tt.at) || r.Prompt != tt.prompt {
				t.Fatalf("Parse = %+v, %v", r, err)
			}
		})
	}
}

// A firing is recorded before it is handed over: a crash right after the
// hand-over (which the gateway's inbox makes durable) does not fire it a
// second time at the next start.
func TestFiringRecordedBeforeFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		var stored []schedule.Schedule
		s, err := schedule.Open(schedule.Options{Path: path, Fire: func(context.Context, schedule.Firing) error {
			again, err := schedule.Open(schedule.Options{Path: path})
			if err != nil {
				return err
			}
			stored = again.List("")
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = s.Run(ctx) }()
		if _, err := s.Add(schedule.Schedule{Cron: "0 * * * *", TZ: "UTC", Location: "l", Creator: "u", Prompt: "hourly"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(90 * time.Minute)
		synctest.Wait()
		cancel()
		<-done
		if len(stored) != 1 || !stored[0].Next.After(time.Date(2000, 1, 1, 1, 0, 0, 0, time.UTC)) {
			t.Fatalf("stored at firing time: %+v, want the next occurrence already recorded", stored)
		}
	})
}

// AddIf stores a schedule only when its check, which sees every stored
// schedule, allows it; a refusal stores nothing.
func TestAddIf(t *testing.T) {
	s, err := schedule.Open(schedule.Options{Path: filepath.Join(t.TempDir(), "schedules.json")})
	if err != nil {
		t.Fatal(err)
	}
	atMostTwo := func(all []schedule.Schedule) error {
		if len(all) >= 2 {
			return errors.New("two already")
		}
		return nil
	}
	at := time.Now().Add(time.Hour)
	for i := range 3 {
		_, err := s.AddIf(schedule.Schedule{At: at, Location: "loc1", Creator: "alice", Prompt: fmt.Sprint("p", i)}, atMostTwo)
		if (err != nil) != (i == 2) {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	if n := len(s.List("")); n != 2 {
		t.Fatalf("%d schedules stored, want 2", n)
	}
}

// TestSharedFile: schedulers of several processes (replicas on one data
// directory) share the file. They all install the configuration at the
// same moment without an error (issue #29: one replica exited with
// "rename schedules.json.tmp schedules.json: no such file or
// directory"), a change made through one is seen by the others, and a
// change through a scheduler that has not read the file since keeps
// what the others added.
func TestSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "schedules.json")
	cfg := []schedule.Schedule{{ID: "cfg-x", Cron: "0 * * * *", TZ: "UTC", Location: "b", Creator: "u", Prompt: "hourly"}}
	const replicas = 3
	var all []*schedule.Scheduler
	for range replicas {
		s, err := schedule.Open(schedule.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}
	for round := range 20 {
		var wg sync.WaitGroup
		for i, s := range all {
			wg.Go(func() {
				if err := s.SetConfig(cfg); err != nil {
					t.Errorf("round %d, replica %d: %v", round, i, err)
				}
			})
		}
		wg.Wait()
	}
	a, b, c := all[0], all[1], all[2]
	x, err := a.Add(schedule.Schedule{Cron: "@daily", TZ: "UTC", Location: "l", Creator: "u", Prompt: "from a"})
	if err != nil {
		t.Fatal(err)
	}
	// b last read the file before a's Add.
	y, err := b.Add(schedule.Schedule{Cron: "@daily", TZ: "UTC", Location: "l", Creator: "u", Prompt: "from b"})
	if err != nil {
		t.Fatal(err)
	}
	prompts := func(s *schedule.Scheduler) string {
		var out []string
		for _, sc := range s.List("l") {
			out = append(out, sc.Prompt)
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	for i, s := range all {
		if got := prompts(s); got != "from a,from b" {
			t.Errorf("replica %d lists %q, want both schedules", i, got)
		}
	}
	if err := c.Cancel(x.ID, nil); err != nil {
		t.Fatal(err)
	}
	if got := prompts(a); got != "from b" {
		t.Errorf("after c cancelled a's schedule, a lists %q", got)
	}
	if err := a.Cancel(x.ID, nil); err != schedule.ErrNotFound {
		t.Errorf("cancelling it again through a = %v, want not found", err)
	}
	if err := a.Cancel(y.ID, nil); err != nil {
		t.Errorf("a cancels b's schedule: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range ents {
		if e.Name() != "schedules.json" && e.Name() != "schedules.json.lock" {
			t.Errorf("left in the directory: %s", e.Name())
		}
	}
}

// TestSharedFileFiresOnce: two schedulers run on one file, as two
// replicas might for a moment while the schedules lease changes hands. A
// schedule added through one is fired by the other, which reads the file
// again every Reread, and each occurrence fires once between them.
func TestSharedFileFiresOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "schedules.json")
		r := &recorder{}
		open := func() *schedule.Scheduler {
			s, err := schedule.Open(schedule.Options{Path: path, Fire: r.fire, Reread: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		a, b := open(), open()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, s := range []*schedule.Scheduler{a, b} {
			wg.Go(func() { _ = s.Run(ctx) })
		}
		time.Sleep(time.Hour) // both idle, each knowing no schedule
		synctest.Wait()
		// Added by a third process (a /schedule command on another
		// replica): neither runner was woken.
		other := open()
		if _, err := other.Add(schedule.Schedule{Cron: "0 9 * * *", TZ: "UTC", Location: "l", Creator: "u", Prompt: "daily"}); err != nil {
			t.Fatal(err)
		}
		if _, err := other.Add(schedule.Schedule{At: time.Now().Add(30 * time.Minute), Location: "l", Creator: "u", Prompt: "once"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * 24 * time.Hour)
		synctest.Wait()
		cancel()
		wg.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		counts := map[string]int{}
		for _, p := range r.fired {
			counts[p]++
		}
		if counts["once"] != 1 || counts["daily"] != 3 {
			t.Errorf("fired %v, want once: 1, daily: 3 (one per day, by either scheduler)", counts)
		}
	})
}
