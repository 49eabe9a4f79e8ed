package gateway_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs more of the tests marked parallel at once than
// -parallel's default (GOMAXPROCS) unless -parallel was given: they wait
// on timers, leases, Redis and group commits far more than they use the
// CPU.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "6")
	}
	os.Exit(m.Run())
}
