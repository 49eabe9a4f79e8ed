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
}

// Scheduler keeps the schedules and fires them.
type Scheduler struct {
	opts Options
	log  *slog.Logger
	wake chan struct{}

	mu    sync.Mutex
	items map[string]*Schedule
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
	b, err := os.ReadFile(opts.Path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("schedule: %s: %w", opts.Path, err)
	}
	for _, sc := range f.Schedules {
		if sc != nil && sc.ID != "" {
			s.items[sc.ID] = sc
		}
	}
	return s, nil
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
	s.mu.Lock()
	defer s.mu.Unlock()
	if may != nil {
		var all []Schedule
		for _, o := range s.items {
			all = append(all, *o)
		}
		if err := may(all); err != nil {
			return Schedule{}, err
		}
	}
	if sc.ID == "" {
		sc.ID = s.newIDLocked()
	}
	stored := sc
	s.items[sc.ID] = &stored
	if err := s.saveLocked(); err != nil {
		delete(s.items, sc.ID)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[string]bool{}
	for _, sc := range list {
		sc.Config = true
		keep[sc.ID] = true
		if old, ok := s.items[sc.ID]; ok && old.Cron == sc.Cron && old.TZ == sc.TZ && old.Location == sc.Location {
			old.Prompt, old.Creator, old.CreatorName = sc.Prompt, sc.Creator, sc.CreatorName
			continue
		}
		n, err := next(&sc, time.Now())
		if err != nil {
			return err
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
	s.poke()
	return s.saveLocked()
}

// List returns the schedules of location ("" for all), soonest first.
func (s *Scheduler) List(location string) []Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.items[id]
	if !ok {
		return ErrNotFound
	}
	if may != nil {
		if err := may(*sc); err != nil {
			return err
		}
	}
	delete(s.items, id)
	if err := s.saveLocked(); err != nil {
		s.items[id] = sc
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
// changed meanwhile).
func (s *Scheduler) advance(f Firing, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.items[f.Schedule.ID]
	if !ok || !sc.Next.Equal(f.Due) {
		return false
	}
	if sc.Cron == "" {
		delete(s.items, sc.ID)
	} else {
		n, err := next(sc, now)
		if err != nil {
			s.log.Warn("schedule: dropped", "id", sc.ID, "err", err)
			delete(s.items, sc.ID)
		} else {
			sc.Next, sc.Last = n, now
		}
	}
	if err := s.saveLocked(); err != nil {
		s.log.Error("schedule: cannot record a firing", "id", sc.ID, "err", err)
	}
	return true
}
