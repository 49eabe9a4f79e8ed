package gateway_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/internal/tinyfs"
)

// inject delivers a user message as a platform would and returns the
// sink's answer (nil: acknowledged).
func (h *harness) inject(id, text string) error {
	in := chat.Inbound{Kind: chat.KindMessage, Conv: dmConv, Msg: chat.MsgRef{Conv: dmConv, ID: id}, User: chat.User{ID: "owner", Name: "Owner"}, Text: text, Time: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.ad.Inject(ctx, in)
}

// TestFullDiskRefusesThenRecovers runs the gateway on a real tmpfs that
// fills up: messages are refused (not acknowledged, the user told once),
// Health reports it; once space is freed the gateway recovers by itself,
// without a restart: the redelivered message and later ones are answered
// in the same session. (Under load the failed session's owner was still
// closing when the next message came, which then started a second
// session file: TestMessageDuringAnUnloadKeepsItsSession.) A failure
// prints the session files.
func TestFullDiskRefusesThenRecovers(t *testing.T) {
	t.Parallel()
	dir := tinyfs.Mount(t, 4<<20)
	h := newHarness(t, nil, withDir(dir)) // the faux model echoes
	if err := h.inject("m1", "one"); err != nil {
		t.Fatal(err)
	}
	h.waitText(dmConv, "You said: one")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	if err := h.g.Health(); err != nil {
		t.Fatalf("Health() = %v before the disk filled", err)
	}

	free := tinyfs.Fill(t, dir)
	// The inbox's last page may still take a line or two: messages are
	// taken until a write needs space that is not there.
	var acked []string
	refused := ""
	for i := range 50 {
		text := fmt.Sprintf("filler %d", i)
		if err := h.inject(fmt.Sprintf("f%d", i), text); err != nil {
			refused = text
			break
		}
		acked = append(acked, text)
	}
	if refused == "" {
		t.Fatal("50 messages were acknowledged on a full disk")
	}
	refusedID := "f" + strings.TrimPrefix(refused, "filler ")
	if err := h.g.Health(); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Health() = %v on a full disk, want the ENOSPC", err)
	}
	h.waitText(dmConv, "cannot store messages")
	// The platform redelivers; still refused, and not told again.
	for range 3 {
		if err := h.inject(refusedID, refused); err == nil {
			t.Fatal("a redelivery was acknowledged on a full disk")
		}
	}
	if n := h.countIn("cannot store messages"); n != 1 {
		t.Fatalf("the user was told %d times, want once", n)
	}
	t.Logf("acknowledged before the refusal: %d", len(acked))

	free()
	h.waitFor("health after space returned", func() bool { return h.g.Health() == nil })
	if err := h.inject(refusedID, refused); err != nil {
		t.Fatalf("the redelivery after space returned: %v", err)
	}
	if err := h.inject("m3", "three"); err != nil {
		t.Fatal(err)
	}
	// Messages taken while a run was busy were steered into it, and the
	// echo quotes only the last one: the session shows each was taken.
	all := append(append([]string{"one"}, acked...), refused, "three")
	h.waitText(dmConv, "You said: three")
	h.waitFor("the inbox to empty", func() bool { return h.inbox.Len() == 0 })
	missing := func() []string {
		s := h.sessions()
		if len(s) != 1 {
			return []string{fmt.Sprintf("%d session files", len(s))}
		}
		got := userTexts(h.entries(s[0]))
		var out []string
		for _, want := range all {
			if !slices.Contains(got, want) {
				out = append(out, want)
			}
		}
		return out
	}
	defer func() {
		if t.Failed() {
			t.Logf("acknowledged messages not in the session: %q; inbox: %d pending", missing(), h.inbox.Len())
			for _, f := range h.sessions() {
				b, _ := os.ReadFile(f)
				t.Logf("%s:\n%s", f, b)
			}
		}
	}()
	h.waitFor("every acknowledged message on disk", func() bool { return len(missing()) == 0 })
	users := userTexts(h.entries(h.sessions()[0]))
	for _, want := range all {
		n := 0
		for _, u := range users {
			if u == want {
				n++
			}
		}
		if n != 1 {
			t.Errorf("user message %q is in the session %d times, want once: %q", want, n, users)
		}
	}
}
