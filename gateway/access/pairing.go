package access

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/atomicfile"
)

// Code alphabet: upper case without the ambiguous 0, O, 1 and I.
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// Limits of the pairing flow. A user holds at most one code, valid CodeTTL
// from its issue: asking again returns the same code and does not extend
// it. A user gets a new code at most once per CodeCooldown, so a few
// strangers cannot keep the MaxPendingPer places of a platform taken by
// asking again: holding them all day takes MaxPendingPer fresh accounts
// every CodeTTL, and anyone else gets a place as soon as one expires.
const (
	CodeLength    = 8
	CodeTTL       = time.Hour
	CodeCooldown  = 24 * time.Hour
	MaxPendingPer = 10
)

// Errors of the pairing store.
var (
	ErrTooManyPending = errors.New("too many pending pairing requests")
	ErrCooldown       = errors.New("a pairing code was issued to this user recently")
	ErrUnknownCode    = errors.New("unknown or expired pairing code")
)

// Request is a pending pairing request.
type Request struct {
	Platform string    `json:"platform"`
	User     string    `json:"user"`
	Name     string    `json:"name,omitempty"`
	Code     string    `json:"code"`
	Created  time.Time `json:"created"`
	// Conv is the direct conversation the code was asked for in, where
	// the user is told once approved; nil when unknown.
	Conv *chat.ConvRef `json:"conv,omitempty"`
}

// Pairing is an approved user.
type Pairing struct {
	Platform string    `json:"platform"`
	User     string    `json:"user"`
	Name     string    `json:"name,omitempty"`
	Approved time.Time `json:"approved"`
	// Conv is where the user asked for their code (Request.Conv); Told
	// is set once pibot told them there that they may talk now.
	Conv *chat.ConvRef `json:"conv,omitempty"`
	Told bool          `json:"told,omitempty"`
}

// Issue records that a user got a code, for CodeCooldown.
type Issue struct {
	Platform string    `json:"platform"`
	User     string    `json:"user"`
	At       time.Time `json:"at"`
}

type pairingFile struct {
	Pending  []Request `json:"pending"`
	Approved []Pairing `json:"approved"`
	Issued   []Issue   `json:"issued,omitempty"`
}

// Store is the pairing state in one JSON file, shared by a running pibot
// and the `pibot pairing` command: every call rereads the file when it
// changed, and a change is made under the file's lock (pairing.json.lock)
// to what the file holds then and written atomically. It is the embedded Pairings; a store
// shared by the replicas of a cluster implements the same methods.
type Store struct {
	mu    sync.Mutex
	path  string
	now   func() time.Time
	data  pairingFile
	mtime time.Time
	size  int64
}

var _ Pairings = (*Store)(nil)

// OpenStore opens the store at path (created on first write).
func OpenStore(path string) (*Store, error) {
	s := &Store{path: path, now: time.Now}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) reloadLocked() error {
	st, err := os.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		s.data = pairingFile{}
		return nil
	}
	if err != nil {
		return fmt.Errorf("access: %w", err)
	}
	if st.ModTime().Equal(s.mtime) && st.Size() == s.size {
		return nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("access: %w", err)
	}
	var d pairingFile
	if err := json.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("access: %s: %w", s.path, err)
	}
	s.data, s.mtime, s.size = d, st.ModTime(), st.Size()
	return nil
}

// changeLocked takes the file's lock (atomicfile.Lock: pibot serve and
// the pibot pairing command may change the file at the same time) and
// reads the file as it is now. unlock releases the lock once the change
// is saved.
func (s *Store) changeLocked() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	unlock, err = atomicfile.Lock(s.path)
	if err != nil {
		return nil, fmt.Errorf("access: %w", err)
	}
	s.mtime = time.Time{} // read it again whatever its time stamp
	if err := s.reloadLocked(); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

func (s *Store) saveLocked() error {
	b, err := json.MarshalIndent(s.data, "", "  ")
	if err != nil {
		return fmt.Errorf("access: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("access: %w", err)
	}
	if err := atomicfile.Write(s.path, append(b, '\n')); err != nil {
		return fmt.Errorf("access: %w", err)
	}
	if st, err := os.Stat(s.path); err == nil {
		s.mtime, s.size = st.ModTime(), st.Size()
	}
	return nil
}

func (s *Store) pruneLocked() {
	now := s.now()
	kept := s.data.Pending[:0]
	for _, r := range s.data.Pending {
		if now.Sub(r.Created) < CodeTTL {
			kept = append(kept, r)
		}
	}
	s.data.Pending = kept
	issued := s.data.Issued[:0]
	for _, r := range s.data.Issued {
		if now.Sub(r.At) < CodeCooldown {
			issued = append(issued, r)
		}
	}
	s.data.Issued = issued
}

// RequestCode returns the pending code of (platform, user), creating one if
// needed. created is false when an existing code was returned (pibot sends
// a code only when a new request is created); its expiry stays that of its
// issue. A user whose code expired gets no new one within CodeCooldown of
// the last (ErrCooldown); a platform holds at most MaxPendingPer codes
// (ErrTooManyPending).
func (s *Store) RequestCode(_ context.Context, platform, user, name string) (code string, created bool, err error) {
	return s.requestCode(platform, user, name, nil)
}

// RequestCodeIn is RequestCode for a user writing in conv, which is
// remembered when it is a direct conversation: once the code is approved
// the gateway tells the user there (Untold, MarkTold).
func (s *Store) RequestCodeIn(_ context.Context, conv chat.ConvRef, user, name string) (code string, created bool, err error) {
	var where *chat.ConvRef
	if conv.DM {
		where = &conv
	}
	return s.requestCode(string(conv.Platform), user, name, where)
}

func (s *Store) requestCode(platform, user, name string, conv *chat.ConvRef) (code string, created bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.changeLocked()
	if err != nil {
		return "", false, err
	}
	defer unlock()
	s.pruneLocked()
	n := 0
	for _, r := range s.data.Pending {
		if r.Platform == platform {
			if r.User == user {
				return r.Code, false, nil
			}
			n++
		}
	}
	for _, r := range s.data.Issued {
		if r.Platform == platform && r.User == user {
			return "", false, fmt.Errorf("access: %s %s: %w", platform, user, ErrCooldown)
		}
	}
	if n >= MaxPendingPer {
		return "", false, fmt.Errorf("access: %s: %w", platform, ErrTooManyPending)
	}
	code = newCode()
	now := s.now().UTC()
	s.data.Pending = append(s.data.Pending, Request{Platform: platform, User: user, Name: name, Code: code, Created: now, Conv: conv})
	s.data.Issued = append(s.data.Issued, Issue{Platform: platform, User: user, At: now})
	return code, true, s.saveLocked()
}

func newCode() string {
	var b [CodeLength]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = codeAlphabet[int(b[i])%len(codeAlphabet)]
	}
	return string(b[:])
}

// Approve turns the pending request with code on platform into a pairing.
func (s *Store) Approve(_ context.Context, platform, code string) (Pairing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.changeLocked()
	if err != nil {
		return Pairing{}, err
	}
	defer unlock()
	s.pruneLocked()
	code = strings.ToUpper(strings.TrimSpace(code))
	for i, r := range s.data.Pending {
		if r.Platform == platform && subtle.ConstantTimeCompare([]byte(r.Code), []byte(code)) == 1 {
			p := Pairing{Platform: r.Platform, User: r.User, Name: r.Name, Approved: s.now().UTC(), Conv: r.Conv}
			s.data.Pending = append(s.data.Pending[:i], s.data.Pending[i+1:]...)
			s.data.Approved = append(s.data.Approved, p)
			return p, s.saveLocked()
		}
	}
	return Pairing{}, fmt.Errorf("access: %s %s: %w", platform, code, ErrUnknownCode)
}

// Revoke removes an approved user (and any pending request of theirs).
func (s *Store) Revoke(_ context.Context, platform, user string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.changeLocked()
	if err != nil {
		return false, err
	}
	defer unlock()
	found := false
	kept := s.data.Approved[:0]
	for _, p := range s.data.Approved {
		if p.Platform == platform && p.User == user {
			found = true
			continue
		}
		kept = append(kept, p)
	}
	s.data.Approved = kept
	pk := s.data.Pending[:0]
	for _, r := range s.data.Pending {
		if !(r.Platform == platform && r.User == user) {
			pk = append(pk, r)
		}
	}
	s.data.Pending = pk
	// The owner's revoke also lifts the cool-down: they may pair again.
	ik := s.data.Issued[:0]
	for _, r := range s.data.Issued {
		if !(r.Platform == platform && r.User == user) {
			ik = append(ik, r)
		}
	}
	s.data.Issued = ik
	return found, s.saveLocked()
}

// List returns pending (unexpired) requests and approved users.
func (s *Store) List(context.Context) ([]Request, []Pairing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, nil, err
	}
	s.pruneLocked()
	return append([]Request(nil), s.data.Pending...), append([]Pairing(nil), s.data.Approved...), nil
}

// Approved reports whether (platform, user) is paired. A file that cannot
// be read is an error (the caller lets nobody in on it).
func (s *Store) Approved(_ context.Context, platform, user string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return false, err
	}
	for _, p := range s.data.Approved {
		if p.Platform == platform && p.User == user {
			return true, nil
		}
	}
	return false, nil
}

// Untold returns the approved users who asked for their code in a known
// conversation and were not yet told there that they may talk.
func (s *Store) Untold(context.Context) ([]Pairing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.reloadLocked(); err != nil {
		return nil, err
	}
	var out []Pairing
	for _, p := range s.data.Approved {
		if p.Conv != nil && !p.Told {
			out = append(out, p)
		}
	}
	return out, nil
}

// MarkTold records that (platform, user) was told of their approval.
func (s *Store) MarkTold(_ context.Context, platform, user string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.changeLocked()
	if err != nil {
		return err
	}
	defer unlock()
	for i, p := range s.data.Approved {
		if p.Platform == platform && p.User == user && !p.Told {
			s.data.Approved[i].Told = true
			return s.saveLocked()
		}
	}
	return nil
}
