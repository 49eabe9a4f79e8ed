package gateway_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/gateway/access"
	"github.com/pibot/pibot/providers/faux"
)

// TestApprovedUserIsTold: a stranger asks for a code in a DM; the owner
// approves it from another process (`pibot pairing approve`, which only
// writes the pairing file); the running gateway tells the stranger, once,
// in the DM where they asked, and they can talk.
func TestApprovedUserIsTold(t *testing.T) {
	t.Parallel()
	h := newHarness(t, []faux.Turn{faux.Text("hello zed")})
	zed := chat.ConvRef{Platform: "test", Channel: "dm-zed", DM: true}
	h.send("hi", inConv(zed), from("zed"))
	h.waitText(zed, "pairing code is")
	var code string
	for _, m := range h.ad.Messages(zed) {
		if c := regexp.MustCompile(`\*\*([A-Z0-9]{8})\*\*`).FindStringSubmatch(m); c != nil {
			code = c[1]
		}
	}
	if code == "" {
		t.Fatalf("no code in %q", h.ad.Messages(zed))
	}
	cli, err := access.OpenStore(filepath.Join(h.dir, "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Approve(t.Context(), "test", code); err != nil {
		t.Fatal(err)
	}
	h.waitText(zed, "you can talk to me now")
	h.waitFor("the approval recorded as told", func() bool {
		untold, err := cli.Untold(t.Context())
		return err == nil && len(untold) == 0
	})
	h.send("hello", inConv(zed), from("zed"))
	h.waitText(zed, "hello zed")
	told := 0
	for _, m := range h.ad.Messages(zed) {
		told += strings.Count(m, "you can talk to me now")
	}
	if told != 1 {
		t.Errorf("told %d times", told)
	}
	// A user paired without a known conversation (an older pairing file)
	// is not announced anywhere.
	h.pairUser("old")
	if untold, err := cli.Untold(t.Context()); err != nil || len(untold) != 0 {
		t.Errorf("untold %v, %v", untold, err)
	}
}
