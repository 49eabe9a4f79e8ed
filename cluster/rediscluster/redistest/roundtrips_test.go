package redistest

import (
	"os"
	"slices"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// The handshake of a connection the pool opens is not counted as a round
// trip of the work the client does: the pool opens one whenever its others
// are busy, however little the work makes. Here the first PING opens one,
// and the third opens a second because the second holds the first.
func TestRoundTripsLeaveOutConnectionHandshakes(t *testing.T) {
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rdb, _, _ := b.Open(t, "s")
			rts := &RoundTrips{}
			rdb.AddHook(rts)
			ctx := t.Context()
			if err := rdb.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			hellos := func() int {
				n := 0
				for _, h := range rts.Handshakes() {
					if h == "hello" {
						n++
					}
				}
				return n
			}
			if n := hellos(); n != 1 {
				t.Fatalf("handshakes = %q, want the first connection's hello", rts.Handshakes())
			}
			held := rdb.Conn() // takes the pool's one connection until closed
			defer held.Close()
			if err := held.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if got := rts.Since(0); !slices.Equal(got, []string{"ping", "ping", "ping"}) || rts.Count() != 3 {
				t.Errorf("round trips = %q (count %d), want three pings", got, rts.Count())
			}
			if n := hellos(); n != 2 {
				t.Errorf("handshakes = %q, want those of two connections", rts.Handshakes())
			}
		})
	}
}
