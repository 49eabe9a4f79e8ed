package session

import (
	"bytes"
	"encoding/json"
	"testing"
)

const fuzzHeader = `{"type":"session","version":3,"id":"x","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}` + "\n"

func FuzzLoad(f *testing.F) {
	f.Add([]byte(fuzzHeader + `{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","provider":"p","model":"m","content":[]}}` + "\n"))
	f.Add([]byte(fuzzHeader + `{"type":"compaction","id":"b","parentId":"a","timestamp":"x","summary":"s","firstKeptEntryId":"a","tokensBefore":1e3}` + "\n{\"type\":\"label\""))
	f.Add([]byte(fuzzHeader + "\x00\x00\n" + `{"type":"custom_message","customType":"c","content":"\u00e9\ud83d","display":true,"id":"c","parentId":"zz","timestamp":""}`))
	f.Add([]byte(`[[[[{"a":-0.5e+7,"b":[true,false,null,"\\\""]}]]]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The envelope scanner must agree with encoding/json on every line.
		for _, line := range bytes.Split(data, []byte("\n")) {
			_, err := scanLine(line)
			var obj map[string]json.RawMessage
			valid := json.Unmarshal(line, &obj) == nil && obj != nil
			if err != nil && errDamaged(err) {
				err = nil // a JSON object, but a damaged entry (entryDamage)
			}
			if (err == nil) != valid {
				t.Fatalf("scanLine(%q) err=%v, encoding/json valid=%v", line, err, valid)
			}
		}
		s, err := loadMem(data)
		if err != nil {
			return
		}
		for _, e := range s.Tree().Entries() {
			c, err := s.Tree().Context(e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.Tree()
	})
}

func FuzzMigrate(f *testing.F) {
	f.Add([]byte(`{"type":"session","id":"x","timestamp":"t","cwd":"/"}` + "\n" +
		`{"type":"message","timestamp":"t","message":{"role":"user","content":"hi","timestamp":1}}` + "\n" +
		`{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":1,"tokensBefore":5}` + "\n"))
	f.Add([]byte(`{"type":"session","version":2,"id":"x","timestamp":"t","cwd":"/"}` + "\n" +
		`{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"hookMessage","customType":"h","content":"c","display":true,"timestamp":1}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := parseData(data, "fuzz")
		if err != nil {
			return
		}
		if p.report.FromVersion < 2 {
			seen := map[string]bool{}
			prev := ""
			for _, n := range p.nodes {
				if seen[n.id] || len(n.id) != 8 || n.parentID != prev {
					t.Fatalf("v1 migration: id %q parent %q prev %q", n.id, n.parentID, prev)
				}
				seen[n.id] = true
				prev = n.id
			}
		}
		var buf bytes.Buffer
		buf.Write(p.headerRaw)
		buf.WriteByte('\n')
		for _, n := range p.nodes {
			if n.typ == TypeMessage && n.role == "hookMessage" {
				t.Fatalf("hookMessage left after migration: %s", n.raw)
			}
			buf.Write(n.raw)
			buf.WriteByte('\n')
		}
		q, err := parseData(buf.Bytes(), "rewritten")
		if err != nil || len(q.nodes) != len(p.nodes) || q.migrated || len(q.report.SkippedLines) != 0 {
			t.Fatalf("rewritten file does not reload cleanly: %v", err)
		}
	})
}

func loadMem(data []byte) (*Session, error) {
	st := NewMemStorage()
	_ = st.MkdirAll("/f")
	if err := st.WriteFile("/f/s.jsonl", data); err != nil {
		return nil, err
	}
	return Open(st, "/f/s.jsonl", Options{ReadOnly: true})
}
