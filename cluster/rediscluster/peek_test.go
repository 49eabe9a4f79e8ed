package rediscluster_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
)

// TestTakeableAcrossRoundTrips: Takeable asks about maxPeeked keys per
// script (a script holds Redis while it runs) and names what every part
// found, each key once, in one answer.
func TestTakeableAcrossRoundTrips(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, prefix, _ := b.Open(t, "peek")
			ib, err := rediscluster.OpenInbox(t.Context(), rdb, rediscluster.Options{Prefix: prefix, Keys: testKeys(t)}, "replica-1")
			if err != nil {
				t.Fatal(err)
			}
			n := 2*rediscluster.MaxPeeked + 10
			var keys, want []string
			for i := range n {
				keys = append(keys, fmt.Sprintf("k%03d", i))
			}
			keys = append(keys, keys[0]) // asked twice, named once
			for _, i := range []int{0, rediscluster.MaxPeeked - 1, rediscluster.MaxPeeked, n - 1} {
				if _, _, err := ib.Enqueue(t.Context(), keys[i], []byte(`"x"`)); err != nil {
					t.Fatal(err)
				}
				want = append(want, keys[i])
			}
			if _, err := ib.Takeable(t.Context(), keys[:1], false); err != nil { // the script loaded
				t.Fatal(err)
			}
			rts := &redistest.RoundTrips{}
			rdb.AddHook(rts)
			got, err := ib.Takeable(t.Context(), keys, false)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("Takeable of %d keys = %q, want %q", len(keys), got, want)
			}
			if parts := (len(keys) + rediscluster.MaxPeeked - 1) / rediscluster.MaxPeeked; rts.Count() != parts {
				t.Errorf("%d round trips for %d keys, want %d: %q", rts.Count(), len(keys), parts, rts.Since(0))
			}
		})
	}
}
