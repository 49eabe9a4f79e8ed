package session

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/pibot/pibot/llm"
)

// An appended custom entry is indexed from the entry itself (knownEntry)
// instead of decoding the line just encoded: what Get and the index see
// must be what decoding the line gives, for every shape of data.
func TestKnownEntryDecodesLikeTheLine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		entry Entry
		known bool // knownEntry takes it (else addLine decodes)
	}{
		{"object", Entry{Type: TypeCustom, CustomType: "pibot.reply", Data: json.RawMessage(`{"refs":[{"id":"1"}],"state":"streaming"}`)}, true},
		{"spaced object", Entry{Type: TypeCustom, CustomType: "pibot.reply", Data: json.RawMessage("{\n  \"state\" : \"ended\" ,\n \"x\": [ 1, 2 ]\n}")}, true},
		{"html and unicode", Entry{Type: TypeCustom, CustomType: "x", Data: json.RawMessage(`{"s":"<b> & ünï \u2028"}`)}, true},
		{"array", Entry{Type: TypeCustom, CustomType: "x", Data: json.RawMessage(` [1, "a"] `)}, true},
		{"no data", Entry{Type: TypeCustom, CustomType: "pibot.head", Pibot: &Meta{Loc: "web:1"}}, true},
		{"with meta", Entry{Type: TypeCustom, CustomType: "pibot.delivery", Data: json.RawMessage(`{"entry":"e1","refs":["a"],"state":"delivered"}`), Pibot: &Meta{Msg: "m<1>"}}, true},
		{"null data", Entry{Type: TypeCustom, CustomType: "x", Data: json.RawMessage(`null`)}, false},
		{"string data", Entry{Type: TypeCustom, CustomType: "x", Data: json.RawMessage(`"s"`)}, false},
		{"label", Entry{Type: TypeLabel, TargetID: "t", Label: new(string)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Create(NewMemStorage(), "/p", Header{}, Entry{Type: TypeModelChange, Provider: "p", ModelID: "m"}, Options{Fence: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			e := tc.entry
			e.ParentID = s.Tree().Leaf()
			if e.Type == TypeLabel {
				e.TargetID = s.Tree().Leaf()
			}
			got, err := s.Append(e, SyncGrouped)
			if err != nil {
				t.Fatal(err)
			}
			if k := knownEntry(&got); (k != nil) != tc.known {
				t.Fatalf("knownEntry took it: %v, want %v", k != nil, tc.known)
			}
			indexed, ok := s.Tree().Get(got.ID)
			if !ok {
				t.Fatal("appended entry not found")
			}
			decoded, err := decodeEntry(got.Raw)
			if err != nil {
				t.Fatal(err)
			}
			// What Get adds from the node on top of either.
			n := s.tree.byID[got.ID]
			decoded.Pibot, decoded.Fence, decoded.Raw = n.meta, n.fence, n.raw
			if !reflect.DeepEqual(indexed, decoded) {
				t.Errorf("indexed entry\n%+v\ndecoded line\n%+v", indexed, decoded)
			}
		})
	}
}

// compactValid elides exactly what json.Compact elides.
func TestCompactValidLikeCompact(t *testing.T) {
	for _, in := range []string{
		`{}`,
		` { "a" : 1 , "b" : [ 1 , 2 , { } ] } `,
		"{\n\t\"s\": \"a b\\t c\\n\",\r\n \"e\": \"\\\\\", \"q\": \"x\\\" y \\\\\\\" z\"}",
		`["  ", "\\", "\"", " \u2028 <b> & ", 1.5e3 , true , null]`,
		`"only a string with  spaces"`,
		"{\"k\" :\"ünïcödé  —  ok\" }",
	} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(in)); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got := llm.CompactValid([]byte(in)); string(got) != want.String() {
			t.Errorf("llm.CompactValid(%q) = %q, want %q", in, got, want.String())
		}
	}
}
