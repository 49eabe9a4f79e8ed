package session

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pibot/pibot/llm"
)

// messageSeeds are messages llm.Message reads and ones it refuses, one
// per rule of checkMessage.
var messageSeeds = []string{
	`{"role":"user","content":"hi","timestamp":1}`,
	`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","data":"x","mimeType":"image/png"}],"timestamp":1.5}`,
	`{"role":"assistant","content":[{"type":"thinking","thinking":"t","redacted":true},{"type":"toolCall","id":"c","name":"n","arguments":{"a":1}}],"api":"a","provider":"p","model":"m","usage":{"input":1,"output":2.0,"cacheRead":"3","cost":{"INPUT":0.5,"total":null,"x":"y"}},"stopReason":"stop","timestamp":"12"}`,
	`{"role":"toolResult","toolCallId":"c","toolName":"n","content":[],"details":{"x":1},"isError":false,"timestamp":1}`,
	`{"role":"bashExecution","command":"ls","output":"","exitCode":null,"cancelled":true,"truncated":false,"content":5,"timestamp":1}`,
	`{"role":"custom","customType":"k","content":"c","display":true,"details":null,"timestamp":1}`,
	`{"role":"compactionSummary","summary":"s","tokensBefore":5,"timestamp":1}`,
	`{"role":"branchSummary","summary":"s","fromId":"x","timestamp":1}`,
	`{"role":null,"content":[{"type":null,"text":5}]}`,
	`{"role":"user","content":[{"type":"text","type":null,"text":5}]}`,
	`{"role":"user","role":"assistant","model":5}`,
	`"x"`, `[]`, `null`, `5`, `true`,
	`{"role":5}`,
	`{"role":"user","content":5}`,
	`{"role":"user","content":{}}`,
	`{"role":"user","content":[5]}`,
	`{"role":"user","content":[null]}`,
	`{"role":"user","content":[{"type":5}]}`,
	`{"role":"user","content":[{"type":"text","text":[]}]}`,
	`{"role":"user","content":[{"type":"thinking","redacted":"yes"}]}`,
	`{"role":"user","timestamp":"x"}`,
	`{"role":"user","timestamp":"1e400"}`,
	`{"role":"user","timestamp":1e400}`,
	`{"role":"user","timestamp":{}}`,
	`{"role":"assistant","usage":[]}`,
	`{"role":"assistant","usage":{"input":"x"}}`,
	`{"role":"assistant","usage":{"cost":{"Total":"1"}}}`,
	`{"role":"assistant","usage":{"cost":[]}}`,
	`{"role":"assistant","stopReason":1}`,
	`{"role":"toolResult","isError":"no"}`,
	`{"role":"bashExecution","exitCode":1.5}`,
	`{"role":"bashExecution","exitCode":"1"}`,
	`{"role":"compactionSummary","tokensBefore":5.0}`,
	`{"rol\u0065":"assistant","model":7}`,
}

// FuzzCheckMessage holds checkMessage to llm.Message's decoder: whatever
// JSON value it is given, both accept it or both refuse it.
func FuzzCheckMessage(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		data = bytes.Trim(data, " \t\r\n")
		if !json.Valid(data) {
			return
		}
		var m llm.Message
		decodeErr := json.Unmarshal(data, &m)
		checkErr := checkMessage(data)
		if (decodeErr == nil) != (checkErr == nil) {
			t.Fatalf("%s: decoder says %v, checkMessage %v", data, decodeErr, checkErr)
		}
	})
}

// TestDamagedEntries: a line that is a JSON object but a damaged entry is
// skipped by the loader like one that is not JSON (reported with why, its
// child re-attached), the context skips it the same way the fast path or
// not, and a writable open (pibot session repair) rewrites the file
// without it, keeping a copy; after that the file is clean.
func TestDamagedEntries(t *testing.T) {
	const hdr = `{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}`
	line := func(id, parent, msg string) string {
		return `{"type":"message","id":"` + id + `","parentId":"` + parent + `","timestamp":"2026-01-01T00:00:01.000Z","message":` + msg + `}`
	}
	ok := `{"role":"user","content":"fine","timestamp":1}`
	for _, tc := range []struct{ name, bad, why string }{
		{"string message", line("b2", "a1", `"x"`), "message: a string, not an object"},
		{"array message", line("b2", "a1", `[]`), "message: an array, not an object"},
		{"null message", line("b2", "a1", `null`), "message: null, not an object"},
		{"no message", `{"type":"message","id":"b2","parentId":"a1","timestamp":"t"}`, "message entry without a message"},
		{"numeric role", line("b2", "a1", `{"role":5,"content":"x"}`), `message: "role" is a number`},
		{"content not blocks", line("b2", "a1", `{"role":"user","content":[7]}`), `message: "content": block 0: a number, not an object`},
		{"usage text", line("b2", "a1", `{"role":"assistant","content":[],"usage":{"input":"many"}}`), `"usage": "input"`},
		{"custom_message content", `{"type":"custom_message","customType":"k","content":{"a":1},"display":true,"id":"b2","parentId":"a1","timestamp":"2026-01-01T00:00:01.000Z"}`, "custom_message content: an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := hdr + "\n" + line("a1", "", ok) + "\n" + tc.bad + "\n" + line("c3", "b2", ok) + "\n" + line("d4", "c3", ok) + "\n"
			data = strings.Replace(data, `"parentId":""`, `"parentId":null`, 1)
			p := filepath.Join(t.TempDir(), "s.jsonl")
			if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			ro, err := OpenFile(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			rep := ro.Report()
			if len(rep.SkippedLines) != 1 || rep.SkippedLines[0].Line != 3 || !strings.Contains(rep.SkippedLines[0].Err, tc.why) {
				t.Fatalf("skipped %+v, want line 3: %s", rep.SkippedLines, tc.why)
			}
			if rep.Reattached["c3"] != "a1" {
				t.Fatalf("reattached %v", rep.Reattached)
			}
			c, err := ro.Tree().Context("")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.LLMMessages(); err != nil || len(c.Messages) != 3 {
				t.Fatalf("context: %d messages, %v", len(c.Messages), err)
			}
			want, _ := c.MarshalJSON()
			ro.Close()
			for _, leaf := range []string{"", "d4", "c3"} {
				var got bytes.Buffer
				if _, err := WriteContext(&got, p, leaf, nil); err != nil {
					t.Fatal(err)
				}
				if leaf == "" && got.String() != string(want)+"\n" {
					t.Fatalf("WriteContext: %s\nwant %s", got.String(), want)
				}
			}
			w, err := OpenFile(p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rep = w.Report()
			w.Close()
			if rep.BrokenCopy == "" {
				t.Fatalf("no copy kept: %+v", rep)
			}
			if b, _ := os.ReadFile(rep.BrokenCopy); string(b) != data {
				t.Fatal("the copy is not the damaged file")
			}
			after, err := OpenFile(p, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer after.Close()
			e, _ := after.Tree().Get("c3")
			if !after.Report().Clean() || after.Tree().Len() != 4 || e.ParentID != "a1" {
				t.Fatalf("after the repair: %+v, %d entries, c3's parent %q", after.Report(), after.Tree().Len(), e.ParentID)
			}
		})
	}
}

// FuzzRepair: whatever the loader refuses in a file, a writable open (the
// repair) fixes, and the repaired file then loads clean, keeps every entry
// the loader had, and gives every one of them the same context.
func FuzzRepair(f *testing.F) {
	const hdr = `{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}` + "\n"
	for _, s := range messageSeeds {
		f.Add([]byte(hdr + `{"type":"message","id":"a1","parentId":null,"timestamp":"t","message":{"role":"user","content":"x"}}` + "\n" +
			`{"type":"message","id":"b2","parentId":"a1","timestamp":"t","message":` + s + "}\n" +
			`{"type":"label","id":"c3","parentId":"b2","timestamp":"t","targetId":"a1","label":"l"}` + "\n"))
	}
	f.Add([]byte(hdr + "{\"type\":\"custom_message\",\"content\":[1],\"id\":\"a\",\"parentId\":null}\nnot json\n{\"type\":\"label\",\"id\":\"b\",\"parentId\":\"a\"}\n{\"type\":\"mess"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ro, err := OpenFile(p, Options{ReadOnly: true})
		if err != nil {
			return // not a session file: nothing to repair
		}
		// A legacy file gets new ids (version 1) or roles (version 2).
		same := ro.Report().FromVersion >= CurrentVersion
		before := map[string]string{}
		for _, e := range ro.Tree().Entries() {
			c, err := ro.Tree().Context(e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.LLMMessages(); err != nil {
				t.Fatalf("loaded a context the agent cannot read: %v", err)
			}
			b, _ := c.MarshalJSON()
			before[e.ID] = string(b)
		}
		ro.Close()
		w, err := OpenFile(p, Options{})
		if err != nil {
			t.Fatalf("repair: %v", err)
		}
		w.Close()
		after, err := OpenFile(p, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("after the repair: %v", err)
		}
		defer after.Close()
		rep := after.Report()
		repaired, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Lines that are not JSON stay (skipped on every read, like pi
		// does); no damaged entry does.
		if q, err := parseData(repaired, p); err != nil || q.damaged != 0 {
			t.Fatalf("after the repair the loader still refuses %d entries (%v): %+v", q.damaged, err, rep.SkippedLines)
		}
		if rep.TailBytes != 0 || len(rep.Cycles) != 0 || rep.MissingNewline || rep.FromVersion < CurrentVersion {
			t.Fatalf("after the repair: %+v", rep)
		}
		if after.Tree().Len() < len(before) {
			t.Fatalf("%d entries after the repair, %d before", after.Tree().Len(), len(before))
		}
		for id, want := range before {
			if !same {
				break
			}
			c, err := after.Tree().Context(id)
			if err != nil {
				t.Fatalf("entry %s lost by the repair: %v", id, err)
			}
			b, _ := c.MarshalJSON()
			if string(b) != want {
				t.Fatalf("entry %s: context changed by the repair:\n%s\n%s", id, b, want)
			}
		}
	})
}
