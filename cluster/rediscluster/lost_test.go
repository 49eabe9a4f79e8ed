package rediscluster_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pibot/pibot/cluster"
	"github.com/pibot/pibot/cluster/rediscluster"
)

// TestTakeAfterALostAnswer: a take whose answer was lost after its script
// ran took items for this process, another replica's among them; they are
// handed over by the next take of the key (or by the client's own run
// again), in the inbox's order, once, and not held until the session's
// lease ends. Before, the items sat in this consumer's pending list: the
// next takes read only new items.
func TestTakeAfterALostAnswer(t *testing.T) {
	tests := []struct {
		name string
		// retries: the client runs the command again after the lost
		// answer (go-redis's default); else the take fails and the next
		// one brings what it took.
		retries int
		admit   bool // the take is an Admit with Take, not a Consume
	}{
		{"consume run again", 2, false},
		{"consume failed", -1, false},
		{"admit run again", 2, true},
		{"admit failed", -1, true},
	}
	for name, addr := range retryTargets(t) {
		for i, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				ctx := t.Context()
				opts := rediscluster.Options{Prefix: fmt.Sprintf("lost%d:", i)} // the tests share a server
				px := newProxy(t, addr)
				rdb := redis.NewClient(&redis.Options{Addr: px.addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: tc.retries})
				t.Cleanup(func() { _ = rdb.Close() })
				a, err := rediscluster.OpenInbox(ctx, rdb, opts, "a")
				if err != nil {
					t.Fatal(err)
				}
				b, err := rediscluster.OpenInbox(ctx, client(t, addr), opts, "b")
				if err != nil {
					t.Fatal(err)
				}
				adm := rediscluster.NewAdmission(rediscluster.NewDedupe(rdb, opts, time.Hour),
					rediscluster.NewBudget(rdb, opts, 0, 0), a, nil)
				enqueue := func(ib *rediscluster.Inbox, data string) {
					t.Helper()
					if _, _, err := ib.Enqueue(ctx, "loc", []byte(data)); err != nil {
						t.Fatal(err)
					}
				}
				take := func(n int) ([]string, error) {
					if tc.admit {
						got, err := adm.Admit(ctx, cluster.Admission{Dedupe: fmt.Sprint("e", n), Key: "loc",
							Data: fmt.Appendf(nil, `"a%d"`, n), Take: true})
						return itemData(got.Taken), err
					}
					got, err := a.Consume(ctx, "loc")
					return itemData(got), err
				}
				// Warm: scripts loaded, a connection open; one item in hand.
				enqueue(b, `"b0"`)
				first, err := take(0)
				if err != nil || len(first) == 0 {
					t.Fatalf("first take = %q, %v", first, err)
				}
				enqueue(b, `"b1"`)
				enqueue(b, `"b2"`)
				px.dropAnswers(1)
				got, err := take(1)
				if tc.retries < 0 {
					if err == nil {
						t.Fatalf("take through a lost answer with no retries = %q, want an error", got)
					}
					// Nothing new in the stream: what the lost answer
					// took is what makes the key takeable (the pump's
					// poll peeks before it takes a held key).
					if ks, err := a.Takeable(ctx, []string{"loc"}, false); err != nil || !slices.Equal(ks, []string{"loc"}) {
						t.Fatalf("Takeable after a lost answer = %q, %v; want loc", ks, err)
					}
					enqueue(b, `"b3"`)
					got, err = take(2)
				}
				if err != nil {
					t.Fatal(err)
				}
				want := []string{`"b1"`, `"b2"`}
				switch {
				case tc.admit && tc.retries < 0:
					want = []string{`"b1"`, `"b2"`, `"a1"`, `"b3"`, `"a2"`}
				case tc.admit:
					want = []string{`"b1"`, `"b2"`, `"a1"`}
				case tc.retries < 0:
					want = []string{`"b1"`, `"b2"`, `"b3"`}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("the take after a lost answer handed %q, want %q", got, want)
				}
				if ks, err := a.Takeable(ctx, []string{"loc"}, true); err != nil || len(ks) != 0 {
					t.Fatalf("Takeable once all is in hand = %q, %v; want none", ks, err)
				}
				if got, err := a.Consume(ctx, "loc"); err != nil || len(got) != 0 {
					t.Fatalf("a take after that = %q, %v; want nothing (it is all in hand)", itemData(got), err)
				}
			})
		}
	}
}

// TestTakeAfterEverythingEnded: once every item a process holds of a key
// has ended, it remembers nothing of the key, and a take still hands out
// nothing twice.
func TestTakeAfterEverythingEnded(t *testing.T) {
	for name, addr := range retryTargets(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			ib, err := rediscluster.OpenInbox(ctx, client(t, addr), rediscluster.Options{}, "a")
			if err != nil {
				t.Fatal(err)
			}
			for round := range 3 {
				id, _, err := ib.Enqueue(ctx, "loc", []byte(`"x"`))
				if err != nil {
					t.Fatal(err)
				}
				if got, err := ib.Consume(ctx, "loc"); err != nil || len(got) != 1 {
					t.Fatalf("round %d: consume = %q, %v", round, itemData(got), err)
				}
				if err := ib.Ack(ctx, "loc", id); err != nil {
					t.Fatal(err)
				}
				if got, err := ib.Consume(ctx, "loc"); err != nil || len(got) != 0 {
					t.Fatalf("round %d: consume after the ack = %q, %v", round, itemData(got), err)
				}
			}
		})
	}
}

// TestClaimAfterALostAnswer: a claim whose answer was lost took over
// another consumer's item older than what this one holds; the next claim
// (or the client's run again) hands it over, and nothing in hand again.
func TestClaimAfterALostAnswer(t *testing.T) {
	for name, addr := range retryTargets(t) {
		for i, retries := range []int{2, -1} {
			t.Run(fmt.Sprintf("%s/retries=%d", name, retries), func(t *testing.T) {
				ctx := t.Context()
				opts := rediscluster.Options{Prefix: fmt.Sprintf("lostclaim%d:", i)}
				px := newProxy(t, addr)
				rdb := redis.NewClient(&redis.Options{Addr: px.addr, ReadTimeout: 200 * time.Millisecond, MaxRetries: retries})
				t.Cleanup(func() { _ = rdb.Close() })
				a, err := rediscluster.OpenInbox(ctx, rdb, opts, "a")
				if err != nil {
					t.Fatal(err)
				}
				d, err := rediscluster.OpenInbox(ctx, client(t, addr), opts, "d")
				if err != nil {
					t.Fatal(err)
				}
				take := func(ib *rediscluster.Inbox, claim bool) ([]string, error) {
					f := ib.Consume
					if claim {
						f = ib.Claim
					}
					got, err := f(ctx, "loc")
					return itemData(got), err
				}
				for _, s := range []struct {
					ib   *rediscluster.Inbox
					data string
				}{{d, `"x"`}, {a, `"y"`}} {
					if _, _, err := s.ib.Enqueue(ctx, "loc", []byte(s.data)); err != nil {
						t.Fatal(err)
					}
					if got, err := take(s.ib, false); err != nil || len(got) != 1 {
						t.Fatalf("consume = %q, %v", got, err)
					}
				}
				px.dropAnswers(1)
				got, err := take(a, true)
				if retries < 0 {
					if err == nil {
						t.Fatalf("claim through a lost answer with no retries = %q, want an error", got)
					}
					got, err = take(a, true)
				}
				if err != nil || !slices.Equal(got, []string{`"x"`}) {
					t.Fatalf("the claim after a lost answer = %q, %v; want x (y is in hand)", got, err)
				}
				for _, claim := range []bool{false, true} {
					if got, err := take(a, claim); err != nil || len(got) != 0 {
						t.Fatalf("a take after that (claim %v) = %q, %v; want nothing", claim, got, err)
					}
				}
			})
		}
	}
}
