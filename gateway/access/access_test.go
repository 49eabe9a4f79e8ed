package access

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pibot/pibot/chat"
)

func dm(user string) chat.Inbound {
	return chat.Inbound{Conv: chat.ConvRef{Platform: "telegram", Channel: user, DM: true}, User: chat.User{ID: user, Name: "u" + user}, Text: "hi"}
}

func group(chatID, user string, mentioned bool) chat.Inbound {
	return chat.Inbound{Conv: chat.ConvRef{Platform: "telegram", Channel: chatID}, User: chat.User{ID: user}, Mentioned: mentioned, Text: "hi"}
}

func TestCheck(t *testing.T) {
	store, err := OpenStore(filepath.Join(t.TempDir(), "pairing.json"))
	if err != nil {
		t.Fatal(err)
	}
	pol := Policy{Owners: []string{"telegram:1"}, Users: []string{"telegram:2"}, DMPolicy: "pairing", Groups: []string{"telegram:-100"}, MentionRequired: true}
	c := NewChecker(pol, store)
	bot := dm("9")
	bot.User.IsBot = true
	reply := group("-100", "5", false)
	reply.ReplyToBot = true
	cmd := group("-100", "5", false)
	cmd.Command = &chat.Command{Name: "help"}
	unlistedCmd := group("-200", "2", false)
	unlistedCmd.Command = &chat.Command{Name: "new"}
	unlistedSlash := group("-200", "5", false)
	unlistedSlash.Command = &chat.Command{Name: "status"}
	unlistedSlash.Interaction = &chat.Interaction{Platform: "telegram", ID: "i1"}
	scheduled := dm("4")
	scheduled.Schedule = "abc123"
	pair(t, store, "8")
	boundThread := group("-100", "5", false)
	boundThread.Conv.Thread, boundThread.Bound = "77", true
	unboundThread := group("-100", "5", false)
	unboundThread.Conv.Thread = "77"
	boundMain := group("-100", "5", false)
	boundMain.Bound = true
	boundUnlisted := group("-200", "5", false)
	boundUnlisted.Conv.Thread, boundUnlisted.Bound = "77", true
	tests := []struct {
		name string
		in   chat.Inbound
		want Verdict
	}{
		{"owner DM", dm("1"), Allow},
		{"allowed user DM", dm("2"), Allow},
		{"stranger DM gets a code", dm("3"), Pair},
		{"stranger again: the same code", dm("3"), Pair},
		{"a stranger's schedule gets no code", scheduled, Ignore},
		{"bot ignored", bot, Ignore},
		{"allowed group, mentioned", group("-100", "5", true), Allow},
		{"allowed group, not mentioned", group("-100", "5", false), Ignore},
		{"reply to bot counts as mention", reply, Allow},
		{"command counts as mention", cmd, Allow},
		{"unknown group, stranger", group("-200", "5", true), Ignore},
		{"unknown group, owner", group("-200", "1", true), Allow},
		{"unknown group, listed user", group("-200", "2", true), Ignore},
		{"unknown group, listed user's command", unlistedCmd, Ignore},
		{"unknown group, a slash command is answered", unlistedSlash, Deny},
		{"unknown group, paired user", group("-200", "8", true), Ignore},
		{"paired user in their DM", dm("8"), Allow},
		{"bound thread needs no mention", boundThread, Allow},
		{"thread the bot is not in needs one", unboundThread, Ignore},
		{"bound main line still needs one", boundMain, Ignore},
		{"bound thread of an unlisted group", boundUnlisted, Ignore},
	}
	for _, tt := range tests {
		if got := c.Check(t.Context(), tt.in).Verdict; got != tt.want {
			t.Errorf("%s: verdict %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestDMPolicies(t *testing.T) {
	for _, tt := range []struct {
		policy string
		want   Verdict
	}{{"open", Allow}, {"allowlist", Ignore}, {"disabled", Ignore}} {
		c := NewChecker(Policy{DMPolicy: tt.policy}, nil)
		if got := c.Check(t.Context(), dm("7")).Verdict; got != tt.want {
			t.Errorf("%s: %v, want %v", tt.policy, got, tt.want)
		}
	}
}

func TestPairingFlow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pairing.json")
	s, _ := OpenStore(path)
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	c := NewChecker(Policy{DMPolicy: "pairing"}, s)
	d := c.Check(t.Context(), dm("42"))
	if d.Verdict != Pair {
		t.Fatalf("verdict %v", d.Verdict)
	}
	reqs, _, _ := s.List(t.Context())
	if len(reqs) != 1 || len(reqs[0].Code) != CodeLength || strings.ContainsAny(reqs[0].Code, "0O1I") {
		t.Fatalf("bad code: %+v", reqs)
	}
	if !strings.Contains(d.Reply, reqs[0].Code) {
		t.Fatalf("reply lacks the code: %q", d.Reply)
	}
	// A second process (the CLI) approves through its own Store on the same file.
	cli, _ := OpenStore(path)
	cli.now = s.now
	if _, err := cli.Approve(t.Context(), "telegram", "WRONGCOD"); !errors.Is(err, ErrUnknownCode) {
		t.Fatalf("wrong code: %v", err)
	}
	if _, err := cli.Approve(t.Context(), "telegram", strings.ToLower(reqs[0].Code)); err != nil {
		t.Fatal(err)
	}
	if c.Check(t.Context(), dm("42")).Verdict != Allow {
		t.Fatal("approved user not allowed by the running checker")
	}
	if ok, _ := cli.Revoke(t.Context(), "telegram", "42"); !ok {
		t.Fatal("revoke found nothing")
	}
	if c.Check(t.Context(), dm("42")).Verdict == Allow {
		t.Fatal("revoked user still allowed")
	}
}

func TestPairingLimitsAndExpiry(t *testing.T) {
	s, _ := OpenStore(filepath.Join(t.TempDir(), "p.json"))
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	for i := range MaxPendingPer {
		if _, _, err := s.RequestCode(t.Context(), "telegram", string(rune('a'+i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.RequestCode(t.Context(), "telegram", "z", ""); !errors.Is(err, ErrTooManyPending) {
		t.Fatalf("4th pending: %v", err)
	}
	if _, _, err := s.RequestCode(t.Context(), "slack", "z", ""); err != nil {
		t.Fatalf("other platform limited: %v", err)
	}
	reqs, _, _ := s.List(t.Context())
	now = now.Add(CodeTTL + time.Second)
	if _, err := s.Approve(t.Context(), "telegram", reqs[0].Code); !errors.Is(err, ErrUnknownCode) {
		t.Fatalf("expired code approved: %v", err)
	}
	if _, _, err := s.RequestCode(t.Context(), "telegram", "z", ""); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	// a's code expired unused: no new one until the cool-down is over.
	if _, _, err := s.RequestCode(t.Context(), "telegram", "a", ""); !errors.Is(err, ErrCooldown) {
		t.Fatalf("new code right after expiry: %v", err)
	}
	if ok, err := s.Revoke(t.Context(), "telegram", "a"); ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if _, _, err := s.RequestCode(t.Context(), "telegram", "a", ""); err != nil {
		t.Fatalf("after the owner's revoke: %v", err)
	}
}

// pair approves user on telegram through the store, as the CLI does.
func pair(t *testing.T, s *Store, user string) {
	t.Helper()
	code, _, err := s.RequestCode(t.Context(), "telegram", user, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Approve(t.Context(), "telegram", code); err != nil {
		t.Fatal(err)
	}
}

func TestGroupAlias(t *testing.T) {
	c := NewChecker(Policy{Groups: []string{"telegram:-100"}}, nil)
	c.Alias("telegram", "-100", "-1009")
	c.Alias("telegram", "-300", "-1003") // an unlisted group gains nothing
	for _, tt := range []struct {
		channel string
		want    bool
	}{{"-100", true}, {"-1009", true}, {"-300", false}, {"-1003", false}} {
		if got := c.GroupAllowed("telegram", tt.channel); got != tt.want {
			t.Errorf("GroupAllowed(%s) = %v, want %v", tt.channel, got, tt.want)
		}
	}
}

// Strangers holding codes cannot keep others from pairing: re-asking
// neither extends a code nor, once it expired, yields a new one within
// the cool-down; the per-platform places free up as codes expire.
func TestPairingCannotBeHeldByReasking(t *testing.T) {
	s, _ := OpenStore(filepath.Join(t.TempDir(), "p.json"))
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	c := NewChecker(Policy{DMPolicy: "pairing"}, s)
	var strangers []string
	for i := range MaxPendingPer {
		u := "s" + string(rune('a'+i))
		strangers = append(strangers, u)
		if d := c.Check(t.Context(), dm(u)); d.Verdict != Pair {
			t.Fatalf("stranger %s: %v", u, d.Verdict)
		}
	}
	first, _, _ := s.List(t.Context())
	// The strangers keep asking every ten minutes for hours.
	for step := range 18 {
		now = now.Add(10 * time.Minute)
		for _, u := range strangers {
			code, created, err := s.RequestCode(t.Context(), "telegram", u, "")
			switch {
			case now.Sub(first[0].Created) < CodeTTL:
				if err != nil || created || code == "" {
					t.Fatalf("step %d, %s: re-asking within the hour: %q %v %v", step, u, code, created, err)
				}
			case !errors.Is(err, ErrCooldown):
				t.Fatalf("step %d, %s: after expiry got %q %v %v, want the cool-down", step, u, code, created, err)
			}
		}
	}
	// Re-asking did not extend the codes: they expired an hour after issue.
	if _, err := s.Approve(t.Context(), "telegram", first[0].Code); !errors.Is(err, ErrUnknownCode) {
		t.Fatalf("a code kept alive by re-asking: %v", err)
	}
	// Meanwhile the platform's places are free for someone else.
	if d := c.Check(t.Context(), dm("newcomer")); d.Verdict != Pair {
		t.Fatalf("newcomer: %v, want a code", d.Verdict)
	}
	// After the cool-down a stranger may ask once more.
	now = first[0].Created.Add(CodeCooldown + time.Second)
	if _, created, err := s.RequestCode(t.Context(), "telegram", strangers[0], ""); err != nil || !created {
		t.Fatalf("after the cool-down: %v %v", created, err)
	}
}

// A listed Discord guild ("discord:<guild id>") lets every member talk in
// its channels and threads; another guild's channels stay closed unless
// their own id is listed; the entry never opens another platform.
func TestGuildListed(t *testing.T) {
	c := NewChecker(Policy{Groups: []string{"discord:500"}, DMPolicy: "pairing", MentionRequired: true}, nil)
	in := func(guild, channel, thread string) chat.Inbound {
		return chat.Inbound{Conv: chat.ConvRef{Platform: "discord", Workspace: guild, Channel: channel, Thread: thread},
			User: chat.User{ID: "7"}, Mentioned: true, Text: "hi"}
	}
	for _, tt := range []struct {
		name string
		in   chat.Inbound
		want Verdict
	}{
		{"channel of the guild", in("500", "600", ""), Allow},
		{"thread of the guild", in("500", "600", "601"), Allow},
		{"other guild", in("501", "600", ""), Ignore},
		{"other guild, a channel whose id is listed", in("501", "500", ""), Allow},
		{"telegram group with that id", chat.Inbound{Conv: chat.ConvRef{Platform: "telegram", Channel: "600", Workspace: "500"}, User: chat.User{ID: "7"}, Mentioned: true}, Ignore},
	} {
		if got := c.Check(t.Context(), tt.in).Verdict; got != tt.want {
			t.Errorf("%s: verdict %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSetPolicy: a reload lets a newly listed user in, removes a dropped
// owner, and keeps the checker's pairings.
func TestSetPolicy(t *testing.T) {
	ctx := context.Background()
	c := NewChecker(Policy{Owners: []string{"test:o"}, DMPolicy: "allowlist"}, nil)
	dm := func(user string) chat.Inbound {
		return chat.Inbound{Kind: chat.KindMessage, Conv: chat.ConvRef{Platform: "test", Channel: user, DM: true}, User: chat.User{ID: user}, Text: "hi"}
	}
	if d := c.Check(ctx, dm("new")); d.Verdict != Ignore {
		t.Fatalf("unlisted user: %v", d.Verdict)
	}
	c.SetPolicy(Policy{Owners: []string{"test:o2"}, Users: []string{"test:new"}, DMPolicy: "allowlist"})
	if d := c.Check(ctx, dm("new")); d.Verdict != Allow {
		t.Errorf("newly listed user after SetPolicy: %v", d.Verdict)
	}
	if c.IsOwner("test", "o") || !c.IsOwner("test", "o2") {
		t.Error("owners not replaced by SetPolicy")
	}
	if d := c.Check(ctx, dm("o")); d.Verdict != Ignore {
		t.Errorf("dropped owner still let in: %v", d.Verdict)
	}
}

// Asking again while the code is valid shows the same code (issue #30.13),
// ReshowBurst times at once, then once per ReshowEvery; no new code is
// made and the code's expiry does not move.
func TestPairingCodeShownAgain(t *testing.T) {
	s, _ := OpenStore(filepath.Join(t.TempDir(), "p.json"))
	now := time.Unix(1_800_000_000, 0)
	s.now = func() time.Time { return now }
	c := NewChecker(Policy{DMPolicy: "pairing"}, s)
	c.now = s.now
	first := c.Check(t.Context(), dm("42"))
	if first.Verdict != Pair {
		t.Fatalf("first ask: %v", first.Verdict)
	}
	reqs, _, _ := s.List(t.Context())
	code, issued := reqs[0].Code, reqs[0].Created
	for i := range ReshowBurst {
		d := c.Check(t.Context(), dm("42"))
		if d.Verdict != Pair || !strings.Contains(d.Reply, code) || !strings.Contains(d.Reply, "same code") {
			t.Fatalf("ask %d again: %v %q, want the code %s again", i+1, d.Verdict, d.Reply, code)
		}
	}
	if d := c.Check(t.Context(), dm("42")); d.Verdict != Ignore {
		t.Fatalf("ask beyond the burst: %v %q, want silence", d.Verdict, d.Reply)
	}
	// Another stranger has a bucket of their own.
	if d := c.Check(t.Context(), dm("43")); d.Verdict != Pair {
		t.Fatalf("another stranger: %v", d.Verdict)
	}
	now = now.Add(ReshowEvery)
	if d := c.Check(t.Context(), dm("42")); d.Verdict != Pair || !strings.Contains(d.Reply, code) {
		t.Fatalf("a minute later: %v %q", d.Verdict, d.Reply)
	}
	if d := c.Check(t.Context(), dm("42")); d.Verdict != Ignore {
		t.Fatalf("twice in that minute: %v", d.Verdict)
	}
	if r := pendingOf(t, s, "42"); r.Code != code || !r.Created.Equal(issued) {
		t.Fatalf("pending after re-asking: %+v, want %s issued %s", r, code, issued)
	}
	// Once the code expired, the cool-down applies: nothing is shown.
	now = now.Add(CodeTTL)
	if d := c.Check(t.Context(), dm("42")); d.Verdict != Ignore {
		t.Fatalf("after expiry: %v %q", d.Verdict, d.Reply)
	}
}

// pendingOf returns user's pending request.
func pendingOf(t *testing.T, s *Store, user string) Request {
	t.Helper()
	reqs, _, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.User == user {
			return r
		}
	}
	t.Fatalf("no pending request of %s in %+v", user, reqs)
	return Request{}
}

// Allows is Check without side effects: a stranger gets no code from it.
func TestAllowsMakesNoCode(t *testing.T) {
	s, _ := OpenStore(filepath.Join(t.TempDir(), "p.json"))
	c := NewChecker(Policy{Owners: []string{"telegram:1"}, DMPolicy: "pairing", Groups: []string{"telegram:-100"}}, s)
	for _, tt := range []struct {
		name string
		in   chat.Inbound
		want bool
	}{
		{"owner DM", dm("1"), true},
		{"stranger DM", dm("3"), false},
		{"listed group", group("-100", "5", true), true},
		{"unlisted group", group("-200", "5", true), false},
	} {
		if got, err := c.Allows(t.Context(), tt.in); got != tt.want || err != nil {
			t.Errorf("%s: Allows = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	if reqs, _, _ := s.List(t.Context()); len(reqs) != 0 {
		t.Fatalf("Allows made pairing codes: %+v", reqs)
	}
}
