package discord

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pibot/pibot/internal/atomicfile"
	"github.com/pibot/pibot/internal/backoff"
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

// resumeState is what the gateway client keeps to resume its session and
// to space its identifies: the session (id, sequence numbers, resume URL)
// and the recent identifies, saved in the state file (Config.StatePath).
type resumeState struct {
	store        *stateStore
	log          *slog.Logger
	identifyBase time.Duration

	mu     sync.Mutex
	sess   gwSession
	idents []time.Time // recent identifies, oldest first
}

// session returns the current session.
func (r *resumeState) session() gwSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess
}

// update changes the session with f.
func (r *resumeState) update(f func(s *gwSession)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.sess)
}

// handled records that a dispatch was handled: a restart resumes after it.
func (r *resumeState) handled(d dispatch) {
	r.update(func(s *gwSession) {
		if s.id == d.session && d.seq > s.done {
			s.done = d.seq
		}
	})
	r.persist(false)
}

// lastSeq is the heartbeat's payload: the last sequence number, or null
// before the first dispatch.
func (r *resumeState) lastSeq() any {
	if s := r.session().seq; s > 0 {
		return s
	}
	return nil
}

// restore takes a saved session young enough to resume and the recent
// identifies.
func (r *resumeState) restore() {
	st := r.store.load()
	if st.SessionID != "" && time.Since(st.SavedAt) < resumeWindow {
		r.update(func(s *gwSession) {
			*s = gwSession{id: st.SessionID, seq: st.Seq, done: st.Seq, resumeURL: st.ResumeURL}
		})
		r.log.Info("discord: resuming the saved gateway session")
	}
	cut := time.Now().Add(-identifyMemory)
	var kept []time.Time
	for _, t := range st.Identifies {
		if t.After(cut) {
			kept = append(kept, t)
		}
	}
	r.mu.Lock()
	r.idents = kept
	r.mu.Unlock()
}

// identifyWait is how long the next IDENTIFY must wait: the back-off of
// the identifies of the last 30 minutes, from the last one.
func (r *resumeState) identifyWait() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := time.Now().Add(-identifyMemory)
	n := 0
	var last time.Time
	for _, t := range r.idents {
		if t.After(cut) {
			n++
			last = t
		}
	}
	if n == 0 {
		return 0
	}
	return time.Until(last.Add(backoff.Jitter(backoff.Exp(r.identifyBase, n, identifyMax))))
}

// noteIdentify records an IDENTIFY now and saves it.
func (r *resumeState) noteIdentify() {
	r.mu.Lock()
	r.idents = append(r.idents, time.Now())
	if len(r.idents) > 64 {
		r.idents = r.idents[len(r.idents)-64:]
	}
	r.mu.Unlock()
	r.persist(true)
}

// persist saves the session and the identifies: at once when force, else
// at most every few seconds (after dispatches).
func (r *resumeState) persist(force bool) {
	r.mu.Lock()
	s := r.sess
	idents := append([]time.Time(nil), r.idents...)
	r.mu.Unlock()
	err := r.store.save(savedState{SessionID: s.id, Seq: s.done, ResumeURL: s.resumeURL, Identifies: idents}, force)
	if err != nil {
		r.log.Warn("discord: cannot save the gateway state", "path", r.store.path, "err", err)
	}
}
