package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pibot/pibot/chat"
	"github.com/pibot/pibot/llm"
	"github.com/pibot/pibot/session"
	"github.com/pibot/pibot/session/sessiontest"
)

// TestContextOfIsContextEntries: what contextOf reads of a branch is what
// contextEntries keeps of the whole branch, and its agent is the first
// agent record on the branch (root first), over generated files of 200
// entries (compactions at random, one every 40 entries, or none; branches;
// kept entries off the branch) with agent records and a compaction
// appended, at leaves all over, lazily loaded (TestBranchTail in session
// compares the eager and lazy reads).
func TestContextOfIsContextEntries(t *testing.T) {
	t.Parallel()
	for _, every := range []int{0, 40, -1} {
		t.Run(fmt.Sprintf("compactions=%d", every), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := sessiontest.GenerateWith(f, 200, 3, sessiontest.GenOptions{CompactEvery: every}); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			appendAgentsAndCompaction(t, path)
			s, err := session.OpenFile(path, session.Options{ReadOnly: true, Lazy: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			all := s.Tree().Entries()
			for i := 0; i < len(all); i += 40 {
				sameContext(t, s.Tree(), all[i].ID)
			}
			sameContext(t, s.Tree(), all[len(all)-1].ID)
			sameContext(t, s.Tree(), all[len(all)-3].ID)
		})
	}
}

// sameContext fails unless contextOf answers at head what contextEntries
// and the first agent record of the whole branch say.
func sameContext(t *testing.T, tree *session.Tree, head string) {
	t.Helper()
	branch, err := tree.Branch(head)
	if err != nil {
		t.Fatal(err)
	}
	wantAgent := ""
	for _, e := range branch {
		if name, ok := agentRecordOf(e); ok {
			wantAgent = name
			break
		}
	}
	got, agent, err := contextOf(tree, head)
	if err != nil {
		t.Fatal(err)
	}
	if want := contextEntries(branch); !reflect.DeepEqual(got, want) {
		t.Fatalf("head %s: %d context entries, want %d", head, len(got), len(want))
	}
	if agent != wantAgent {
		t.Fatalf("head %s: agent %q, want %q", head, agent, wantAgent)
	}
}

// appendAgentsAndCompaction continues the default branch of the session
// at path: an agent record, a user message, a compaction keeping from it,
// another agent record (not the branch's agent) and an answer.
func appendAgentsAndCompaction(t *testing.T, path string) {
	t.Helper()
	s, err := session.OpenFile(path, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add := func(e session.Entry) string {
		t.Helper()
		e.ParentID = s.Tree().Leaf()
		out, err := s.Append(e, session.SyncGrouped)
		if err != nil {
			t.Fatal(err)
		}
		return out.ID
	}
	record := func(name string) json.RawMessage {
		b, _ := json.Marshal(agentRecord{Name: name})
		return b
	}
	add(session.Entry{Type: session.TypeCustom, CustomType: customAgent, Data: json.RawMessage(`{"name":5}`)}) // not a record
	add(session.Entry{Type: session.TypeCustom, CustomType: customAgent, Data: record("first")})
	u := llm.UserText("kept from here", 1)
	kept := add(session.Entry{Type: session.TypeMessage, Message: &u})
	add(session.Entry{Type: session.TypeCompaction, Summary: "summary", FirstKeptEntryID: kept, TokensBefore: 10})
	add(session.Entry{Type: session.TypeCustom, CustomType: customAgent, Data: record("second")})
	a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("answer")}, StopReason: llm.StopStop}
	add(session.Entry{Type: session.TypeMessage, Message: &a})
}

// TestHistoryReadsAFileRewrittenUnderIt: a session file rewritten (as a
// repair rewrites one) after a history read opened it lazily is read
// again as it is now, as a read of the whole file would have read it,
// not answered with session.ErrFileChanged.
func TestHistoryReadsAFileRewrittenUnderIt(t *testing.T) {
	g := newBareGateway(t)
	conv := chat.ConvRef{Platform: "test", Channel: "c", DM: true}
	s, err := session.CreateFile(sessionsDir(g.cfg.DataDir), session.Header{}, session.Entry{Type: session.TypeModelChange, Provider: "faux", ModelID: "m"}, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	u := llm.UserText("question", 1)
	a := llm.Message{Role: llm.RoleAssistant, Content: []llm.Content{llm.TextBlock("answer")}, StopReason: llm.StopStop}
	for _, m := range []*llm.Message{&u, &a} {
		if _, err := s.Append(session.Entry{Type: session.TypeMessage, ParentID: s.Tree().Leaf(), Message: m, Pibot: &session.Meta{Loc: conv.Key()}}, session.SyncAlways); err != nil {
			t.Fatal(err)
		}
	}
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := g.index.Bind(t.Context(), conv.Key(), path); err != nil {
		t.Fatal(err)
	}
	h := &history{platform: conv.Platform, index: g.index, reg: g.sessions}
	r := h.reading()
	defer r.close()
	if _, err := r.at(path); err != nil {
		t.Fatal(err)
	}
	// A blank line after the header moves every entry's line.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nl := bytes.IndexByte(data, '\n') + 1
	if err := os.WriteFile(path, append(append(data[:nl:nl], '\n'), data[nl:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := r.branchOf(t.Context(), conv.Key())
	if err != nil {
		t.Fatal(err)
	}
	if msgs := transcriptOf(b.context, "", conv.Key()); len(msgs) != 2 || msgs[0].Text != "question" || msgs[1].Text != "answer" {
		t.Fatalf("transcript %+v, want the question and its answer", msgs)
	}
}
