package e2e_test

import (
	"os/exec"
	"testing"

	"github.com/pibot/pibot/providers/faux"
)

// The session files a Discord conversation writes (a DM main line with a
// reply branch, a thread opened by a mention) open in pi with the context
// pibot builds, leaf by leaf. Skipped until compat/pi-check.sh has
// installed pi.
func TestDiscordSessionsOpenInPi(t *testing.T) {
	pi := piDir()
	node, err := exec.LookPath("node")
	if pi == "" || err != nil {
		t.Skip("pi is not installed (run compat/pi-check.sh once) or node is missing")
	}
	dw := newDiscordWorld(t, []faux.Turn{faux.Text("one"), faux.Text("two"), faux.Text("branch"), faux.Text("thread")})
	dw.say(dDM, dOwner, "q1", false, "")
	one := dw.waitText(dDM, dOwner.ID, "one")
	dw.say(dDM, dOwner, "q2", false, "")
	dw.waitText(dDM, dOwner.ID, "two")
	dw.say(dDM, dOwner, "q3", false, one.ID)
	dw.waitText(dDM, dOwner.ID, "branch")
	m := dw.say(dChan, dMember, "q4", true, "")
	dw.waitText(m.ID, dMember.ID, "thread")
	dw.stop()
	checkSessionsInPi(t, pi, node, dw.sessionFiles())
}
