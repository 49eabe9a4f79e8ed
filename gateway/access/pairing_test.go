package access

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestPairingStoreFailureIsReported replays a pairing file that cannot be
// read (damaged by hand while pibot runs): nobody is let in or handed a
// code on it, the decision carries the error for the log, and users the
// config lists are not affected.
func TestPairingStoreFailureIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pairing.json")
	s, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	pair(t, s, "8")
	c := NewChecker(Policy{DMPolicy: "pairing", Users: []string{"telegram:1"}}, s)
	if d := c.Check(t.Context(), dm("8")); d.Verdict != Allow || d.Err != nil {
		t.Fatalf("paired user before the damage: %+v", d)
	}
	if err := os.WriteFile(path, []byte(`{"approved": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"8", "stranger"} {
		d := c.Check(t.Context(), dm(user))
		if d.Verdict != Ignore || d.Err == nil {
			t.Fatalf("user %s on a damaged store: %+v, want Ignore with an error", user, d)
		}
	}
	if known, err := c.Known(t.Context(), "telegram", "8"); known || err == nil {
		t.Fatalf("Known on a damaged store = %v, %v", known, err)
	}
	if d := c.Check(t.Context(), dm("1")); d.Verdict != Allow || d.Err != nil {
		t.Fatalf("a listed user on a damaged store: %+v", d)
	}
}

// TestPairingStoreSharedByTwoProcesses: pibot serve hands out codes while
// the pibot pairing command approves one, each through a store of its own
// on one file (issue #29: every writer of a shared file checked). No
// request and no approval is lost to the other's write.
func TestPairingStoreSharedByTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pairing.json")
	serve, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := OpenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := serve.RequestCode(t.Context(), "telegram", "first", "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range MaxPendingPer - 1 {
			if _, _, err := serve.RequestCode(t.Context(), "telegram", fmt.Sprint("u", i), ""); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		if _, err := cli.Approve(t.Context(), "telegram", code); err != nil {
			t.Error(err)
		}
		for i := range MaxPendingPer - 1 {
			if _, _, err := cli.RequestCode(t.Context(), "slack", fmt.Sprint("u", i), ""); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	for _, s := range []*Store{serve, cli} {
		pending, paired, err := s.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 2*(MaxPendingPer-1) || len(paired) != 1 {
			t.Errorf("%d pending (want %d), %d paired (want 1)", len(pending), 2*(MaxPendingPer-1), len(paired))
		}
	}
}
