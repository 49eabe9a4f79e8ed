package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/atomicfile"
)

// FileStore is the embedded Store: one day's counts and overrides in a
// JSON file, replaced atomically (a crash keeps the old or the new file).
// An override is written at once; counts, which change with every model
// answer, are written at most once per flushAfter (a crash of pibot loses
// at most that much counting), and by Close. Only the latest day is kept:
// a change on a new day starts the file afresh. It serves one process.
type FileStore struct {
	path string

	mu     sync.Mutex
	data   fileData
	dirty  bool        // counts not in the file yet
	timer  *time.Timer // the pending write of the counts
	err    error       // the last failed write of the counts, for the next Add
	closed bool
}

// flushAfter is how long counts may wait in memory for their write.
const flushAfter = time.Second

type fileData struct {
	Day       string              `json:"day"`
	Used      map[string]Amount   `json:"used"`
	Overrides map[string]Override `json:"overrides"`
}

// OpenFile opens (or starts) the store at path.
func OpenFile(path string) (*FileStore, error) {
	s := &FileStore{path: path}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("spend: %w", err)
	default:
		if err := json.Unmarshal(b, &s.data); err != nil {
			return nil, fmt.Errorf("spend: %s is damaged (%v); move it away to start counting afresh", path, err)
		}
	}
	return s, nil
}

// dayLocked returns the data of day, nil if the file holds another day.
func (s *FileStore) dayLocked(day string) *fileData {
	if s.data.Day != day {
		return nil
	}
	return &s.data
}

// startLocked makes the data day's, starting the day afresh if the file
// holds another one.
func (s *FileStore) startLocked(day string) {
	if s.data.Day != day {
		s.data = fileData{Day: day, Used: map[string]Amount{}, Overrides: map[string]Override{}}
	}
	if s.data.Used == nil {
		s.data.Used = map[string]Amount{}
	}
	if s.data.Overrides == nil {
		s.data.Overrides = map[string]Override{}
	}
}

// writeLocked replaces the file with the data.
func (s *FileStore) writeLocked() error {
	b, err := json.Marshal(s.data)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, b); err != nil {
		return err
	}
	s.dirty = false
	return nil
}

// flush writes counts that wait; a failure waits for the next Add to be
// reported, and the counts for the next write.
func (s *FileStore) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if s.dirty && !s.closed {
		s.err = s.writeLocked()
	}
}

// Close writes the counts that wait and stops the store.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.dirty {
		return s.writeLocked()
	}
	return nil
}

// Add implements Store. The counts reach the file within flushAfter; Add
// reports a failure of the previous write.
func (s *FileStore) Add(_ context.Context, day string, keys []string, a Amount) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(day, keys, a)
}

// addLocked is Add under the store's lock.
func (s *FileStore) addLocked(day string, keys []string, a Amount) error {
	s.startLocked(day)
	for _, k := range keys {
		s.data.Used[k] = s.data.Used[k].Add(a)
	}
	s.dirty = true
	if s.closed {
		return s.writeLocked()
	}
	if s.timer == nil {
		s.timer = time.AfterFunc(flushAfter, s.flush)
	}
	err := s.err
	s.err = nil
	return err
}

// Reserve implements Store: the comparison and the addition happen under
// the store's lock. The counts reach the file as Add's do.
func (s *FileStore) Reserve(_ context.Context, day string, keys []string, caps []Cap, a Amount) (bool, []Amount, error) {
	if len(caps) != len(keys) {
		return false, nil, fmt.Errorf("spend: reserve: %d caps for %d keys", len(caps), len(keys))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	used := make([]Amount, len(keys))
	if d := s.dayLocked(day); d != nil {
		for i, k := range keys {
			used[i] = d.Used[k]
		}
	}
	for i, c := range caps {
		if !c.Fits(used[i], a) {
			return false, used, nil
		}
	}
	return true, used, s.addLocked(day, keys, a)
}

// Usage implements Store.
func (s *FileStore) Usage(_ context.Context, day string, keys []string) ([]Amount, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Amount, len(keys))
	if d := s.dayLocked(day); d != nil {
		for i, k := range keys {
			out[i] = d.Used[k]
		}
	}
	return out, nil
}

// SetOverride implements Store: the override (and any counts that wait)
// is in the file when it returns; on a failed write it is undone.
func (s *FileStore) SetOverride(_ context.Context, day, key string, o Override) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	prevDay := s.data
	s.startLocked(day)
	prev, had := s.data.Overrides[key]
	s.data.Overrides[key] = o
	if err := s.writeLocked(); err != nil {
		if had {
			s.data.Overrides[key] = prev
		} else {
			delete(s.data.Overrides, key)
		}
		if prevDay.Day != day {
			s.data = prevDay
		}
		return err
	}
	return nil
}

// Overrides implements Store.
func (s *FileStore) Overrides(_ context.Context, day string, keys []string) ([]Override, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Override, len(keys))
	if d := s.dayLocked(day); d != nil {
		for i, k := range keys {
			out[i] = d.Overrides[k]
		}
	}
	return out, nil
}

var _ Store = (*FileStore)(nil)
