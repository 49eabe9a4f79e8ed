package e2e

import "testing"

// aimedKills is filled in below.
func aimedKills(t *testing.T, bin string) {}
