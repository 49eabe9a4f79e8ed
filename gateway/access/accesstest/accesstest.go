// Package accesstest is a conformance suite for pairing stores: the file
// store of package access passes it, and a store the replicas of a
// cluster share must pass it too. It checks the pairing flow and its
// limits (access.CodeTTL, access.CodeCooldown, access.MaxPendingPer).
package accesstest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/gateway/access"
)

// Store is what RunPairingStoreTests drives: the checker's side
// (access.Pairings) and the pairing command's.
type Store interface {
	access.Pairings
	Approve(ctx context.Context, platform, code string) (access.Pairing, error)
	Revoke(ctx context.Context, platform, user string) (bool, error)
	List(ctx context.Context) ([]access.Request, []access.Pairing, error)
}

// Harness opens stores for RunPairingStoreTests.
type Harness struct {
	// Open returns an empty store on fresh storage and a function that
	// lets its time pass.
	Open func(t *testing.T) (Store, func(time.Duration))
}

// RunPairingStoreTests runs the suite.
func RunPairingStoreTests(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store, advance func(time.Duration))
	}{
		{"RequestApproveRevoke", testFlow},
		{"AskingAgainReturnsTheSameCode", testSameCode},
		{"PendingPlacesPerPlatform", testMaxPending},
		{"CodesExpireAndCoolDown", testExpiry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, advance := h.Open(t)
			tc.fn(t, s, advance)
		})
	}
}

func request(t *testing.T, s Store, platform, user string) (string, bool) {
	t.Helper()
	code, created, err := s.RequestCode(t.Context(), platform, user, "Name "+user)
	if err != nil {
		t.Fatalf("RequestCode(%s, %s): %v", platform, user, err)
	}
	return code, created
}

func approved(t *testing.T, s Store, platform, user string) bool {
	t.Helper()
	ok, err := s.Approved(t.Context(), platform, user)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func testFlow(t *testing.T, s Store, _ func(time.Duration)) {
	ctx := t.Context()
	code, created := request(t, s, "telegram", "42")
	if !created || len(code) != access.CodeLength {
		t.Fatalf("first request: code %q created %v", code, created)
	}
	pending, paired, err := s.List(ctx)
	if err != nil || len(pending) != 1 || len(paired) != 0 || pending[0].User != "42" || pending[0].Code != code {
		t.Fatalf("List = %+v %+v %v", pending, paired, err)
	}
	if approved(t, s, "telegram", "42") {
		t.Fatal("approved before the owner approved")
	}
	if _, err := s.Approve(ctx, "slack", code); !errors.Is(err, access.ErrUnknownCode) {
		t.Fatalf("a code approved on another platform: %v", err)
	}
	if _, err := s.Approve(ctx, "telegram", "WRONGCOD"); !errors.Is(err, access.ErrUnknownCode) {
		t.Fatalf("a wrong code: %v", err)
	}
	p, err := s.Approve(ctx, "telegram", " "+strings.ToLower(code)+" ")
	if err != nil || p.User != "42" || p.Name != "Name 42" {
		t.Fatalf("Approve = %+v, %v", p, err)
	}
	if !approved(t, s, "telegram", "42") || approved(t, s, "slack", "42") {
		t.Fatal("approval not kept, or kept for another platform")
	}
	if _, err := s.Approve(ctx, "telegram", code); !errors.Is(err, access.ErrUnknownCode) {
		t.Fatalf("a code used twice: %v", err)
	}
	if ok, err := s.Revoke(ctx, "telegram", "42"); !ok || err != nil {
		t.Fatalf("Revoke = %v, %v", ok, err)
	}
	if approved(t, s, "telegram", "42") {
		t.Fatal("approved after revoke")
	}
	if ok, err := s.Revoke(ctx, "telegram", "42"); ok || err != nil {
		t.Fatalf("second Revoke = %v, %v", ok, err)
	}
}

func testSameCode(t *testing.T, s Store, advance func(time.Duration)) {
	code, _ := request(t, s, "telegram", "42")
	advance(access.CodeTTL / 2)
	again, created := request(t, s, "telegram", "42")
	if again != code || created {
		t.Fatalf("asking again: %q created %v, want %q not created", again, created, code)
	}
	// Asking again did not extend the code.
	advance(access.CodeTTL/2 + time.Second)
	if _, err := s.Approve(t.Context(), "telegram", code); !errors.Is(err, access.ErrUnknownCode) {
		t.Fatalf("a code kept alive by asking again: %v", err)
	}
}

func testMaxPending(t *testing.T, s Store, _ func(time.Duration)) {
	for i := range access.MaxPendingPer {
		request(t, s, "telegram", string(rune('a'+i)))
	}
	if _, _, err := s.RequestCode(t.Context(), "telegram", "z", ""); !errors.Is(err, access.ErrTooManyPending) {
		t.Fatalf("a request over MaxPendingPer: %v", err)
	}
	request(t, s, "slack", "z") // places are per platform
}

func testExpiry(t *testing.T, s Store, advance func(time.Duration)) {
	ctx := t.Context()
	code, _ := request(t, s, "telegram", "a")
	advance(access.CodeTTL + time.Second)
	if _, err := s.Approve(ctx, "telegram", code); !errors.Is(err, access.ErrUnknownCode) {
		t.Fatalf("an expired code approved: %v", err)
	}
	if pending, _, err := s.List(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("expired request listed: %+v %v", pending, err)
	}
	if _, _, err := s.RequestCode(ctx, "telegram", "a", ""); !errors.Is(err, access.ErrCooldown) {
		t.Fatalf("a new code right after expiry: %v", err)
	}
	advance(access.CodeCooldown)
	if _, created := request(t, s, "telegram", "a"); !created {
		t.Fatal("no new code after the cool-down")
	}
	// The owner's revoke lifts the cool-down.
	request(t, s, "telegram", "b")
	advance(access.CodeTTL + time.Second)
	if _, err := s.Revoke(ctx, "telegram", "b"); err != nil {
		t.Fatal(err)
	}
	if _, created := request(t, s, "telegram", "b"); !created {
		t.Fatal("the cool-down outlived the owner's revoke")
	}
}
