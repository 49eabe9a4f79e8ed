package session_test

import (
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

func newFaultyStorage() *sessiontest.FaultyStorage {
	return &sessiontest.FaultyStorage{Storage: session.NewMemStorage()}
}

// durableResult records the one call of an OnDurable callback.
type durableResult struct {
	calls atomic.Int32
	err   atomic.Pointer[error]
}

func (r *durableResult) fn(err error) {
	r.calls.Add(1)
	r.err.Store(&err)
}

// state is "waiting", "durable" or "failed" (with the error).
func (r *durableResult) state() (string, error) {
	switch n := r.calls.Load(); {
	case n == 0:
		return "waiting", nil
	case n > 1:
		return "called more than once", nil
	}
	if err := *r.err.Load(); err != nil {
		return "failed", err
	}
	return "durable", nil
}

// writtenSession opens a session file on st (created durably) with one
// user message appended after it and put into the file, not synced: a
// run's end.
func writtenSession(t *testing.T, st session.Storage, window time.Duration) *session.Session {
	t.Helper()
	if err := st.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	s, err := session.Create(st, "/d", session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"}, session.Options{GroupWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	m := llm.UserText("hello", 1)
	if _, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, session.SyncWritten); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOnDurable: a callback waits for the fsync covering what was
// appended before it (not the write), gets a failure instead of that
// fsync when the writer fails or is fenced, and runs at once when there
// is nothing to wait for.
func TestOnDurable(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then does what follows the callback's registration.
		then    func(t *testing.T, s *session.Session, st *sessiontest.FaultyStorage)
		want    string
		wantErr error
	}{
		{"nothing more: waits", func(*testing.T, *session.Session, *sessiontest.FaultyStorage) {}, "waiting", nil},
		{"write: still waits", func(t *testing.T, s *session.Session, _ *sessiontest.FaultyStorage) {
			if err := s.Write(); err != nil {
				t.Fatal(err)
			}
		}, "waiting", nil},
		{"flush", func(t *testing.T, s *session.Session, _ *sessiontest.FaultyStorage) {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}, "durable", nil},
		{"sync-always append", func(t *testing.T, s *session.Session, _ *sessiontest.FaultyStorage) {
			m := llm.UserText("more", 2)
			if _, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, session.SyncAlways); err != nil {
				t.Fatal(err)
			}
		}, "durable", nil},
		{"close", func(t *testing.T, s *session.Session, _ *sessiontest.FaultyStorage) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}, "durable", nil},
		{"failed fsync", func(t *testing.T, s *session.Session, st *sessiontest.FaultyStorage) {
			st.FailSyncs.Store(1)
			if err := s.Flush(); err == nil {
				t.Fatal("Flush succeeded on a failing disk")
			}
		}, "failed", syscall.EIO},
		{"fenced", func(t *testing.T, s *session.Session, _ *sessiontest.FaultyStorage) {
			s.SetFenced(nil)
		}, "failed", session.ErrFenced},
		{"close while fenced", func(t *testing.T, s *session.Session, _ *sessiontest.FaultyStorage) {
			s.SetFenced(nil)
			_ = s.Close()
		}, "failed", session.ErrFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newFaultyStorage()
			s := writtenSession(t, st, time.Hour)
			defer s.Close()
			var r durableResult
			s.OnDurable(r.fn)
			tc.then(t, s, st)
			got, err := r.state()
			if got != tc.want || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("callback %s (%v), want %s (%v)", got, err, tc.want, tc.wantErr)
			}
			if tc.want != "failed" {
				return
			}
			// The writer is done for: a later callback fails at once too.
			var later durableResult
			s.OnDurable(later.fn)
			if got, _ := later.state(); got != "failed" {
				t.Fatalf("a callback after the failure is %s, want failed", got)
			}
		})
	}
}

// TestOnDurableAtOnce: with everything durable (or nothing appended) the
// callback runs before OnDurable returns.
func TestOnDurableAtOnce(t *testing.T) {
	st := newFaultyStorage()
	s := writtenSession(t, st, time.Hour)
	defer s.Close()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var r durableResult
	s.OnDurable(r.fn)
	if got, err := r.state(); got != "durable" {
		t.Fatalf("callback %s (%v) with everything durable, want durable at once", got, err)
	}
}

// TestOnDurableSharesTheGroupCommit: the callbacks of several runs'
// ends within a group window are all satisfied by the window's one fsync,
// run on its goroutine, and may use the session (no lock of it is held).
func TestOnDurableSharesTheGroupCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFaultyStorage()
		s := writtenSession(t, st, time.Second)
		defer s.Close()
		base := st.Syncs.Load()
		var rs [3]durableResult
		for i := range rs {
			m := llm.UserText("run", int64(i))
			if _, err := s.Append(session.Entry{Type: session.TypeMessage, Message: &m, ParentID: s.Tree().Leaf()}, session.SyncWritten); err != nil {
				t.Fatal(err)
			}
			s.OnDurable(func(err error) {
				_ = s.Tree().Leaf() // would deadlock under the session's locks
				if err := s.Write(); err != nil {
					t.Error(err)
				}
				rs[i].fn(err)
			})
			time.Sleep(200 * time.Millisecond)
		}
		for i := range rs {
			if got, _ := rs[i].state(); got != "waiting" {
				t.Fatalf("run %d: %s before the group commit, want waiting", i, got)
			}
		}
		time.Sleep(time.Second)
		synctest.Wait()
		for i := range rs {
			if got, err := rs[i].state(); got != "durable" {
				t.Fatalf("run %d: %s (%v) after the group commit, want durable", i, got, err)
			}
		}
		if n := st.Syncs.Load() - base; n != 1 {
			t.Fatalf("%d fsyncs for three runs within one window, want 1", n)
		}
	})
}

// TestOnDurableOfADeferredFile: a deferred file's creation is durable,
// so it satisfies the callbacks of what it holds.
func TestOnDurableOfADeferredFile(t *testing.T) {
	st := newFaultyStorage()
	if err := st.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	s, err := session.Create(st, "/d", session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"}, session.Options{DeferCreate: true, GroupWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var r durableResult
	s.OnDurable(r.fn)
	if got, _ := r.state(); got != "waiting" {
		t.Fatalf("callback %s before the file exists, want waiting", got)
	}
	if err := s.Write(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.state(); got != "durable" {
		t.Fatalf("callback %s (%v) once the file is created, want durable", got, err)
	}
}
