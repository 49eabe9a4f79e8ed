package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/atomicfile"
)

// Schedule is one scheduled prompt.
type Schedule struct {
	ID string `json:"id"`
	// Cron is a recurring schedule's expression; At a one-shot's time.
	Cron string    `json:"cron,omitempty"`
	At   time.Time `json:"at,omitzero"`
	// TZ is the cron expression's time zone (IANA name); "" means the
	// process's local zone.
	TZ string `json:"tz,omitempty"`
	// Location is the gateway's key of the chat location the prompt goes
	// to, and Creator the user it comes from ("platform:user id").
	Location string `json:"location"`
	Creator  string `json:"creator"`
	// CreatorName is shown in listings.
	CreatorName string `json:"creator_name,omitempty"`
	Prompt      string `json:"prompt"`
	// Config marks a schedule from the configuration file (it cannot be
	// cancelled from chat; the file owns it).
	Config bool `json:"config,omitempty"`
	// Next is when it fires next; Last when it last fired.
	Next time.Time `json:"next"`
	Last time.Time `json:"last,omitzero"`
}

// Firing is one firing of a schedule.
type Firing struct {
	Schedule Schedule
	// Due is the occurrence that fired (the earliest one missed, when
	// pibot was down).
	Due time.Time
}

// Key identifies the firing, for deduplication: a firing repeated after a
// crash (fired, not yet recorded) has the same key.
func (f Firing) Key() string {
	return fmt.Sprintf("schedule:%s:%d", f.Schedule.ID, f.Due.Unix())
}

// Fire delivers a firing. An error is logged; the schedule moves on.
type Fire func(ctx context.Context, f Firing) error

// Options configures a Scheduler.
type Options struct {
	// Path is the JSON file the schedules live in.
	Path string
	Fire Fire
	// Logger receives firings and errors; nil discards them.
	Logger *slog.Logger
	// Reread is how often Run reads the file again for what other
	// processes sharing it (replicas on one data directory) changed;
	// 0 reads it again only before a change and a listing.
	Reread time.Duration
}

// Scheduler keeps the schedules and fires them. Several schedulers, in
// several processes, may share the file: each change is made under the
// file's lock (atomicfile.Lock) to what the file holds then, and a
// listing or a firing first reads what changed since.
type Scheduler struct {
	opts Options
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex
	items map[string]*Schedule
	read  os.FileInfo // the file as last read or written; nil when missing
}

// file is the stored form.
type file struct {
	Schedules []*Schedule `json:"schedules"`
}

// Open reads the schedules in opts.Path (a missing file is empty).
func Open(opts Options) (*Scheduler, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{opts: opts, log: log, wake: make(chan struct{}, 1), items: map[string]*Schedule{}}
	if err := s.loadLocked(true); err != nil {
		return nil, err
	}
	return s, nil
}

// loadLocked reads the file into items when it changed since it was last
// read or written (or always, with force). On error items stay as they
// were.
func (s *Scheduler) loadLocked(force bool) error {
	st, err := os.Stat(s.opts.Path)
	if errors.Is(err, os.ErrNotExist) {
		s.items, s.read = map[string]*Schedule{}, nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	if !force && s.read != nil && os.SameFile(st, s.read) && st.ModTime().Equal(s.read.ModTime()) && st.Size() == s.read.Size() {
		return nil
	}
	b, err := os.ReadFile(s.opts.Path)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("schedule: %s: %w", s.opts.Path, err)
	}
	items := map[string]*Schedule{}
	for _, sc := range f.Schedules {
		if sc != nil && sc.ID != "" {
			items[sc.ID] = sc
		}
	}
	s.items, s.read = items, st
	return nil
}

// refreshLocked reads what other processes changed, keeping the
// schedules known when the file cannot be read.
func (s *Scheduler) refreshLocked() {
	if err := s.loadLocked(false); err != nil {
		s.log.Error("schedule: cannot read the schedules again; keeping those known", "err", err)
	}
}

// change applies fn to the schedules the file holds, under its lock, and
// writes the result when fn returns true. Should that fail, the
// schedules are read again from the file.
func (s *Scheduler) change(fn func() (bool, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := atomicfile.Lock(s.opts.Path)
	if err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	defer unlock()
	if err := s.loadLocked(true); err != nil {
		return err
	}
	write, err := fn()
	if err == nil && write {
		err = s.saveLocked()
	}
	if err != nil {
		_ = s.loadLocked(true)
		return err
	}
	return nil
}

// saveLocked writes every schedule atomically.
func (s *Scheduler) saveLocked() error {
	f := file{Schedules: s.sortedLocked("")}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.opts.Path, b); err != nil {
		return fmt.Errorf("schedule: save: %w", err)
	}
	if st, err := os.Stat(s.opts.Path); err == nil {
		s.read = st
	} else {
		s.read = nil
	}
	return nil
}

func (s *Scheduler) sortedLocked(location string) []*Schedule {
	var out []*Schedule
	for _, sc := range s.items {
		if location == "" || sc.Location == location {
			out = append(out, sc)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Next.Equal(out[j].Next) {
			return out[i].Next.Before(out[j].Next)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// next returns the first occurrence of sc strictly after t.
func next(sc *Schedule, t time.Time) (time.Time, error) {
	if sc.Cron == "" {
		return time.Time{}, nil // one-shot: no further occurrence
	}
	c, err := ParseCron(sc.Cron)
	if err != nil {
		return time.Time{}, err
	}
	loc := time.Local
	if sc.TZ != "" {
		if loc, err = time.LoadLocation(sc.TZ); err != nil {
			return time.Time{}, fmt.Errorf("schedule: time zone %q: %w", sc.TZ, err)
		}
	}
	return c.Next(t.In(loc)), nil
}

// Add stores a new schedule (its ID and Next are set here) and returns it.
func (s *Scheduler) Add(sc Schedule) (Schedule, error) { return s.AddIf(sc, nil) }

// AddIf is Add if may allows it: may sees every stored schedule, under
// the lock that the addition takes, and returns why not, or nil.
func (s *Scheduler) AddIf(sc Schedule, may func(all []Schedule) error) (Schedule, error) {
	if sc.Prompt == "" || sc.Location == "" {
		return Schedule{}, errors.New("schedule: a prompt and a location are required")
	}
	if (sc.Cron == "") == sc.At.IsZero() {
		return Schedule{}, errors.New("schedule: either a cron expression or a time is required")
	}
	now := time.Now()
	if sc.Cron != "" {
		n, err := next(&sc, now)
		if err != nil {
			return Schedule{}, err
		}
		sc.Next = n
	} else {
		sc.Next = sc.At
	}
	err := s.change(func() (bool, error) {
		if may != nil {
			var all []Schedule
			for _, o := range s.items {
				all = append(all, *o)
			}
			if err := may(all); err != nil {
				return false, err
			}
		}
		if sc.ID == "" {
			sc.ID = s.newIDLocked()
		}
		stored := sc
		s.items[sc.ID] = &stored
		return true, nil
	})
	if err != nil {
		return Schedule{}, err
	}
	s.poke()
	return sc, nil
}

func (s *Scheduler) newIDLocked() string {
	for {
		var b [3]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if _, taken := s.items[id]; !taken {
			return id
		}
	}
}

// SetConfig replaces the schedules from the configuration file with
// list (IDs "cfg-NAME" chosen by the caller). A schedule that did not
// change keeps its next firing, so a restart catches up on a missed one.
func (s *Scheduler) SetConfig(list []Schedule) error {
	err := s.change(func() (bool, error) {
		keep := map[string]bool{}
		for _, sc := range list {
			sc.Config = true
			keep[sc.ID] = true
			if old, ok := s.items[sc.ID]; ok && old.Cron == sc.Cron && old.TZ == sc.TZ && old.Location == sc.Location {
				old.Prompt, old.Creator, old.CreatorName, old.Config = sc.Prompt, sc.Creator, sc.CreatorName, true
				continue
			}
			n, err := next(&sc, time.Now())
			if err != nil {
				return false, err
			}
			sc.Next = n
			stored := sc
			s.items[sc.ID] = &stored
		}
		for id, sc := range s.items {
			if sc.Config && !keep[id] {
				delete(s.items, id)
			}
		}
		return true, nil
	})
	s.poke()
	return err
}

// List returns the schedules of location ("" for all), soonest first.
func (s *Scheduler) List(location string) []Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLocked()
	var out []Schedule
	for _, sc := range s.sortedLocked(location) {
		out = append(out, *sc)
	}
	return out
}

// ErrNotFound is returned by Cancel for an unknown ID.
var ErrNotFound = errors.New("schedule: no such schedule")

// Cancel removes schedule id if may allows it (may sees the schedule and
// returns why not, or nil).
func (s *Scheduler) Cancel(id string, may func(Schedule) error) error {
	err := s.change(func() (bool, error) {
		sc, ok := s.items[id]
		if !ok {
			return false, ErrNotFound
		}
		if may != nil {
			if err := may(*sc); err != nil {
				return false, err
			}
		}
		delete(s.items, id)
		return true, nil
	})
	if err != nil {
		return err
	}
	s.poke()
	return nil
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run fires schedules when they are due until ctx is done. A schedule
// that came due while pibot was down fires once at start; its next
// firing is the first occurrence after now.
func (s *Scheduler) Run(ctx context.Context) error {
	for {
		wait := s.fireDue(ctx)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// idle is how long Run sleeps with nothing scheduled.
const idle = 24 * time.Hour

// fireDue fires what is due and returns how long to wait for the next.
func (s *Scheduler) fireDue(ctx context.Context) time.Duration {
	now := time.Now()
	s.mu.Lock()
	s.refreshLocked()
	var due []Firing
	for _, sc := range s.sortedLocked("") {
		if !sc.Next.After(now) {
			due = append(due, Firing{Schedule: *sc, Due: sc.Next})
		}
	}
	s.mu.Unlock()
	for _, f := range due {
		if ctx.Err() != nil {
			return 0
		}
		// Recorded first: once Fire returns, the gateway's inbox holds
		// the firing and replays it after a crash, so firing again
		// after a crash would run it twice.
		if !s.advance(f, now) {
			continue
		}
		if err := s.opts.Fire(ctx, f); err != nil {
			s.log.Warn("schedule: firing failed", "id", f.Schedule.ID, "err", err)
		} else {
			s.log.Info("schedule: fired", "id", f.Schedule.ID, "due", f.Due)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := idle
	if s.opts.Reread > 0 {
		wait = s.opts.Reread
	}
	for _, sc := range s.items {
		if d := time.Until(sc.Next); d < wait {
			wait = max(d, 0)
		}
	}
	return wait
}

// advance records that f fires at now: a one-shot is removed, a recurring
// schedule moves to its first occurrence after now (missed ones are not
// fired again). It returns false when f is no longer due (cancelled or
// changed meanwhile, or fired by another process sharing the file).
func (s *Scheduler) advance(f Firing, now time.Time) bool {
	due := false
	err := s.change(func() (bool, error) {
		sc, ok := s.items[f.Schedule.ID]
		if !ok || !sc.Next.Equal(f.Due) {
			return false, nil
		}
		due = true
		if sc.Cron == "" {
			delete(s.items, sc.ID)
		} else if n, err := next(sc, now); err != nil {
			s.log.Warn("schedule: dropped", "id", sc.ID, "err", err)
			delete(s.items, sc.ID)
		} else {
			sc.Next, sc.Last = n, now
		}
		return true, nil
	})
	if err != nil {
		s.log.Error("schedule: cannot record a firing", "id", f.Schedule.ID, "err", err)
	}
	return due
}
