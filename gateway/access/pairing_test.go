package access

import (
	"os"
	"path/filepath"
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
