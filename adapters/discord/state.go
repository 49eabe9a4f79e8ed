package discord

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/atomicfile"
)

// Gateway state kept across restarts (Config.StatePath), so that a process
// that crashes and restarts resumes its session instead of identifying
// again, and spaces its identifies out even across a crash loop: Discord
// allows 1,000 identifies a day.
const (
	// resumeWindow is how old a saved session may be and still be tried:
	// Discord keeps a closed session resumable for a few minutes.
	resumeWindow = 3 * time.Minute
	// identifyMemory is how far back saved identifies count for the
	// back-off.
	identifyMemory = 30 * time.Minute
	// saveEvery bounds how often the sequence number is written.
	saveEvery = 5 * time.Second
)

// savedState is the file's content. It holds no token.
type savedState struct {
	SessionID  string      `json:"session_id,omitempty"`
	Seq        int64       `json:"seq,omitempty"`
	ResumeURL  string      `json:"resume_url,omitempty"`
	SavedAt    time.Time   `json:"saved_at"`
	Identifies []time.Time `json:"identifies,omitempty"`
}

// stateStore reads and writes the state file; a nil path keeps nothing.
type stateStore struct {
	path string

	mu        sync.Mutex
	lastWrite time.Time
}

// load returns the saved state; a missing or unreadable file is an empty
// state.
func (s *stateStore) load() savedState {
	if s.path == "" {
		return savedState{}
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return savedState{}
	}
	var st savedState
	if json.Unmarshal(b, &st) != nil {
		return savedState{}
	}
	return st
}

// save writes st; unless force, at most once per saveEvery.
func (s *stateStore) save(st savedState, force bool) error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && time.Since(s.lastWrite) < saveEvery {
		return nil
	}
	st.SavedAt = time.Now()
	cut := time.Now().Add(-identifyMemory)
	kept := st.Identifies[:0:0]
	for _, t := range st.Identifies {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	st.Identifies = kept
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, b); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s.lastWrite = time.Now()
	return nil
}

// restore takes a saved session young enough to resume and the recent
// identifies.
func (g *gatewayClient) restore() []time.Time {
	st := g.store.load()
	if st.SessionID != "" && time.Since(st.SavedAt) < resumeWindow {
		g.setSession(func(s *gwSession) {
			*s = gwSession{id: st.SessionID, seq: st.Seq, done: st.Seq, resumeURL: st.ResumeURL}
		})
		g.log.Info("discord: resuming the saved gateway session")
	}
	cut := time.Now().Add(-identifyMemory)
	var out []time.Time
	for _, t := range st.Identifies {
		if t.After(cut) {
			out = append(out, t)
		}
	}
	return out
}

// persistWith writes the session and identifies (force: now).
func (g *gatewayClient) persistWith(identifies []time.Time, force bool) {
	s := g.session()
	err := g.store.save(savedState{SessionID: s.id, Seq: s.done, ResumeURL: s.resumeURL, Identifies: identifies}, force)
	if err != nil {
		g.log.Warn("discord: cannot save the gateway state", "path", g.store.path, "err", err)
	}
}
