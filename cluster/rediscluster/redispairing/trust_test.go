package redispairing_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pibot/pibot/cluster/rediscluster"
	"github.com/pibot/pibot/cluster/rediscluster/redispairing"
	"github.com/pibot/pibot/cluster/rediscluster/redistest"
	"github.com/pibot/pibot/gateway/access"
)

// testKeys returns the sealing keys of a test's cluster secret.
func testKeys(t testing.TB) *rediscluster.Keys {
	t.Helper()
	k, err := rediscluster.NewKeys([]byte("test cluster secret, 32 bytes at least"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPairingsRefuseARewrittenRecord replays the attack of issue 30: with
// write access to Redis (a paired user's unsandboxed bash through
// redis-cli), a stranger is added to the pairing record, as plain JSON
// and as another deployment's sealed record copied over. Neither pairs
// the stranger; both are reported; the next approval writes a sealed
// record again and the paired user it names is paired.
func TestPairingsRefuseARewrittenRecord(t *testing.T) {
	for _, b := range redistest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := t.Context()
			rdb, prefix, _ := b.Open(t, "s")
			var mu sync.Mutex
			var forged []string
			opts := rediscluster.Options{Prefix: prefix, Keys: testKeys(t), OnForged: func(kind, at string) {
				mu.Lock()
				defer mu.Unlock()
				forged = append(forged, kind+" "+at)
			}}
			p := redispairing.NewPairings(rdb, opts)
			code, _, err := p.RequestCode(ctx, "telegram", "friend", "Friend")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Approve(ctx, "telegram", code); err != nil {
				t.Fatal(err)
			}
			raw, err := rdb.Get(ctx, prefix+"pairing").Result()
			if err != nil || strings.Contains(raw, "friend") {
				t.Fatalf("the record in Redis = %q, %v; want sealed", raw, err)
			}

			plain, _ := json.Marshal(map[string]any{"approved": []access.Pairing{
				{Platform: "telegram", User: "friend", Approved: time.Now()},
				{Platform: "telegram", User: "stranger", Approved: time.Now()},
			}})
			rdbOther, otherPrefix, _ := b.Open(t, "other")
			otherPrefix += "other:" // another deployment
			po := redispairing.NewPairings(rdbOther, rediscluster.Options{Prefix: otherPrefix, Keys: testKeys(t)})
			c2, _, err := po.RequestCode(ctx, "telegram", "stranger", "S")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := po.Approve(ctx, "telegram", c2); err != nil {
				t.Fatal(err)
			}
			copied, err := rdbOther.Get(ctx, otherPrefix+"pairing").Result()
			if err != nil {
				t.Fatal(err)
			}
			for name, value := range map[string]string{"plain JSON": string(plain), "another deployment's record": copied} {
				if err := rdb.Set(ctx, prefix+"pairing", value, 0).Err(); err != nil {
					t.Fatal(err)
				}
				if ok, err := p.Approved(ctx, "telegram", "stranger"); err != nil || ok {
					t.Errorf("%s: stranger approved = %v, %v; want false", name, ok, err)
				}
			}
			mu.Lock()
			n := len(forged)
			mu.Unlock()
			if n != 2 {
				t.Errorf("reported %d forged records, want 2: %q", n, forged)
			}
			// The next change replaces the record with a sealed one.
			code, _, err = p.RequestCode(ctx, "telegram", "friend", "Friend")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Approve(ctx, "telegram", code); err != nil {
				t.Fatal(err)
			}
			if ok, err := p.Approved(ctx, "telegram", "friend"); err != nil || !ok {
				t.Errorf("friend approved again = %v, %v", ok, err)
			}
			if ok, _ := p.Approved(ctx, "telegram", "stranger"); ok {
				t.Error("stranger approved after the record was rewritten")
			}
		})
	}
}
