package compaction_test

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/pibot/pibot/agent/agenttest"
	"github.com/pibot/pibot/agent/compaction"
	"github.com/pibot/pibot/llm"
)

// piSettings are the settings the agent-compaction vector was written with
// (keepRecentTokens 1000 reproduces all three of pi's cut points).
var piSettings = compaction.Settings{Enabled: true, ReserveTokens: 16384, KeepRecentTokens: 1000}

func TestPrepareMatchesPiVectors(t *testing.T) {
	entries := loadVector(t, "agent-compaction.jsonl")
	var n int
	for _, e := range entries {
		if e.Type != compaction.EntryCompaction {
			continue
		}
		n++
		branch := branchTo(entries, *e.ParentID)
		p, err := compaction.Prepare(branch, piSettings)
		if err != nil {
			t.Fatalf("compaction %s: %v", e.ID, err)
		}
		if p.FirstKeptEntryID != e.FirstKeptEntryID || p.TokensBefore != e.TokensBefore || !p.IsSplitTurn {
			t.Errorf("compaction %s: got first=%s tokens=%d split=%v, pi: first=%s tokens=%d split=true",
				e.ID, p.FirstKeptEntryID, p.TokensBefore, p.IsSplitTurn, e.FirstKeptEntryID, e.TokensBefore)
		}
		want := fileDetails(e.Details)
		if got := p.Files.Lists(); !reflect.DeepEqual(got, *want) {
			t.Errorf("compaction %s: files = %+v, pi %+v", e.ID, got, *want)
		}
		if n > 1 && p.PreviousSummary == "" {
			t.Errorf("compaction %s: no previous summary", e.ID)
		}
		// The turn prefix starts with the user message of the cut turn.
		if len(p.TurnPrefixMessages) == 0 || p.TurnPrefixMessages[0].Role != llm.RoleUser {
			t.Errorf("compaction %s: turn prefix = %+v", e.ID, p.TurnPrefixMessages)
		}
	}
	if n != 3 {
		t.Fatalf("found %d compactions, want 3", n)
	}
}

// TestCompactSummaryShape runs Compact on pi's first compaction and checks
// the pieces pi's stored summary is made of: history summary, split-turn
// separator, turn-prefix summary and <read-files> suffix.
func TestCompactSummaryShape(t *testing.T) {
	entries := loadVector(t, "agent-compaction.jsonl")
	var target rawEntry
	for _, e := range entries {
		if e.Type == compaction.EntryCompaction {
			target = e
			break
		}
	}
	p, err := compaction.Prepare(branchTo(entries, *target.ParentID), piSettings)
	if err != nil {
		t.Fatal(err)
	}
	model := &promptModel{answers: map[string]string{"PREFIX of a turn": "PREFIX SUMMARY", "<conversation>": "HISTORY SUMMARY"}}
	res, err := compaction.Compact(t.Context(), model, p, "", llm.ThinkingHigh)
	if err != nil {
		t.Fatal(err)
	}
	sep := "\n\n---\n\n**Turn Context (split turn):**\n\n"
	wantTags := target.Summary[strings.LastIndex(target.Summary, "\n\n<read-files>"):]
	if want := "HISTORY SUMMARY" + sep + "PREFIX SUMMARY" + wantTags; res.Summary != want {
		t.Errorf("summary =\n%q\nwant\n%q", res.Summary, want)
	}
	if !strings.Contains(target.Summary, sep) {
		t.Errorf("pi summary lacks the split-turn separator")
	}
	if res.FirstKeptEntryID != target.FirstKeptEntryID || res.TokensBefore != target.TokensBefore {
		t.Errorf("result = %+v", res)
	}
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.SystemPrompt != compaction.SystemPrompt {
			t.Errorf("system prompt = %q", r.SystemPrompt)
		}
		text := r.Messages[0].Text()
		switch {
		case strings.Contains(text, "PREFIX of a turn"):
			if r.MaxTokens != 8192 {
				t.Errorf("prefix maxTokens = %d, want 8192", r.MaxTokens)
			}
		default:
			if r.MaxTokens != 13107 {
				t.Errorf("history maxTokens = %d, want 13107", r.MaxTokens)
			}
			if !strings.HasPrefix(text, "<conversation>\n[User]: Read pkg/store/part1.go") {
				t.Errorf("history prompt starts %q", text[:80])
			}
		}
		if r.Thinking != "" {
			t.Errorf("thinking %q sent to a non-reasoning model", r.Thinking)
		}
	}
}

func TestCompactUpdateAndInstructions(t *testing.T) {
	entries := loadVector(t, "agent-compaction.jsonl")
	var second rawEntry
	for _, e := range entries {
		if e.Type == compaction.EntryCompaction && e.ID == "739d5344" {
			second = e
		}
	}
	p, err := compaction.Prepare(branchTo(entries, *second.ParentID), piSettings)
	if err != nil {
		t.Fatal(err)
	}
	model := &promptModel{answers: map[string]string{"": "S"}, info: llm.ModelInfo{ID: "m", Reasoning: true}}
	if _, err := compaction.Compact(t.Context(), model, p, "focus on redis", llm.ThinkingMedium); err != nil {
		t.Fatal(err)
	}
	var hist string
	for _, r := range model.requests() {
		if r.Thinking != llm.ThinkingMedium {
			t.Errorf("thinking = %q", r.Thinking)
		}
		if !strings.Contains(r.Messages[0].Text(), "PREFIX of a turn") {
			hist = r.Messages[0].Text()
		}
	}
	if !strings.Contains(hist, "<previous-summary>\n"+p.PreviousSummary+"\n</previous-summary>\n\n") ||
		!strings.HasSuffix(hist, "\n\nAdditional focus: focus on redis") || !strings.Contains(hist, "NEW conversation messages") {
		t.Errorf("update prompt wrong:\n%s", hist)
	}
}

func TestCompactFailure(t *testing.T) {
	p := &compaction.Preparation{MessagesToSummarize: []llm.Message{llm.UserText("x", 1)}, Settings: compaction.DefaultSettings()}
	m := agenttest.NewScript(llm.ModelInfo{}, agenttest.Fail("overloaded"))
	_, err := compaction.Compact(t.Context(), m, p, "", "")
	if err == nil || err.Error() != "Summarization failed: overloaded" {
		t.Errorf("err = %v", err)
	}
}

// TestContextMessagesMatchPi compares ContextMessages with the context pi
// built for every leaf of the compaction vectors.
func TestContextMessagesMatchPi(t *testing.T) {
	for _, name := range []string{"agent-compaction", "sm-compaction-edges", "agent-tree"} {
		t.Run(name, func(t *testing.T) {
			entries := loadVector(t, name+".jsonl")
			f, err := os.Open(filepath.Join(vectorDir, name+".context.jsonl"))
			if err != nil {
				t.Skip(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 8<<20)
			checked := 0
			for sc.Scan() {
				var line struct {
					Leaf     *string         `json:"leaf"`
					Messages json.RawMessage `json:"messages"`
				}
				if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Leaf == nil {
					continue
				}
				got, err := json.Marshal(compaction.ContextMessages(branchTo(entries, *line.Leaf)))
				if err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(t, got, line.Messages) {
					t.Errorf("leaf %s: context differs\n got %.300s\nwant %.300s", *line.Leaf, got, line.Messages)
				}
				checked++
			}
			if checked == 0 {
				t.Fatal("no leaves checked")
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// promptModel answers with the text registered for the first key found in
// the prompt ("" matches everything) and records requests.
type promptModel struct {
	mu      sync.Mutex
	answers map[string]string
	info    llm.ModelInfo
	reqs    []llm.Request
}

func (m *promptModel) Info() llm.ModelInfo { return m.info }

func (m *promptModel) requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

func (m *promptModel) Stream(ctx context.Context, req llm.Request) iter.Seq[llm.Event] {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	text := req.Messages[0].Text()
	answer := ""
	for _, key := range []string{"PREFIX of a turn", "<conversation>", ""} {
		if a, ok := m.answers[key]; ok && strings.Contains(text, key) {
			answer = a
			break
		}
	}
	return agenttest.NewScript(llm.ModelInfo{}, agenttest.Reply(agenttest.Text(answer))).Stream(ctx, req)
}
