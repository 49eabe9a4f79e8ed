package spend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/pibot/pibot/internal/atomicfile"
)

// FileStore is the embedded Store: one day's counts and overrides in a
// JSON file, replaced atomically on every change (a crash keeps the old or
// the new file). Only the latest day is kept: a change on a new day
// starts the file afresh. It serves one process.
type FileStore struct {
	path string

	mu   sync.Mutex
	data fileData
}

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

// changeLocked applies f to day's data (starting the day if needed) and
// writes the file; on a failed write the change is undone.
func (s *FileStore) changeLocked(day string, f func(d *fileData)) error {
	next := fileData{Day: day, Used: map[string]Amount{}, Overrides: map[string]Override{}}
	if s.data.Day == day {
		for k, v := range s.data.Used {
			next.Used[k] = v
		}
		for k, v := range s.data.Overrides {
			next.Overrides[k] = v
		}
	}
	f(&next)
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, b); err != nil {
		return err
	}
	s.data = next
	return nil
}

// Add implements Store.
func (s *FileStore) Add(_ context.Context, day string, keys []string, a Amount) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changeLocked(day, func(d *fileData) {
		for _, k := range keys {
			d.Used[k] = d.Used[k].Add(a)
		}
	})
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

// SetOverride implements Store.
func (s *FileStore) SetOverride(_ context.Context, day, key string, o Override) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changeLocked(day, func(d *fileData) { d.Overrides[key] = o })
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
