package e2e_test

import "testing"

func TestZZDebug(t *testing.T) {
	aw := newApprovalWorld(t)
	for _, m := range aw.srv.Messages(ownerChat) {
		t.Logf("%d: %q buttons=%d", m.ID, m.Text, len(m.Buttons))
	}
}
