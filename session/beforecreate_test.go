package session_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pibot/pibot/session"
)

// TestBeforeCreateRunsBeforeTheFileExists: a deferred file is created only
// after BeforeCreate succeeded (the gateway makes the location's binding
// durable there); when it fails, no file is created and the flush fails.
func TestBeforeCreateRunsBeforeTheFileExists(t *testing.T) {
	for _, fail := range []bool{false, true} {
		st := session.NewMemStorage()
		existed := true
		var path string
		hook := func() error {
			_, err := st.ReadFile(path)
			existed = err == nil
			if fail {
				return errors.New("binding not durable")
			}
			return nil
		}
		s, err := session.Create(st, "/d", session.Header{ID: "x", Timestamp: "t"}, session.Entry{Type: session.TypeModelChange, Provider: "p", ModelID: "m"},
			session.Options{DeferCreate: true, GroupWindow: time.Hour, BeforeCreate: hook})
		if err != nil {
			t.Fatal(err)
		}
		path = s.Path()
		err = s.Flush()
		if existed {
			t.Fatalf("fail=%v: the file existed when BeforeCreate ran", fail)
		}
		files, _ := st.List("/d")
		switch {
		case fail && (err == nil || len(files) != 0):
			t.Fatalf("a failing BeforeCreate: flush %v, files %v", err, files)
		case !fail && (err != nil || len(files) != 1):
			t.Fatalf("flush %v, files %v", err, files)
		}
		if _, rerr := st.ReadFile(path); !fail && rerr != nil {
			t.Fatalf("the file is not at %s: %v", path, rerr)
		}
		s.Close()
	}
}
