package session

import "testing"

func TestPiPrefix(t *testing.T) {
	const tail = `"message":{"role":"user","content":"x","timestamp":1}}`
	tests := []struct {
		line              string
		ok                bool
		id, parent, fence string
	}{
		{`{"type":"message","id":"a1","parentId":null,"timestamp":"t",` + tail, true, `"a1"`, "null", ""},
		{`{"type":"message","id":"a1","parentId":"p0","timestamp":"t","pibot":{"loc":"slack:C1","msg":"1.2"},"fence":7,` + tail, true, `"a1"`, `"p0"`, "7"},
		{`{"type":"message","id":"a1","parentId":"p0","timestamp":"t","fence":7,` + tail, true, `"a1"`, `"p0"`, "7"},
		{`{"type":"message","id":"a1","parentId":"p0","timestamp":"t","fence":7,"pibot":{},` + tail, false, "", "", ""},
		{`{"type":"message","id":"a\u0031","parentId":null,"timestamp":"t",` + tail, false, "", "", ""},
		{`{"type":"message", "id":"a1","parentId":null,"timestamp":"t",` + tail, false, "", "", ""},
		{`{"type":"message","id":"a1","parentId":null,"timestamp":"t","pibot":{"loc":},` + tail, false, "", "", ""},
		{`{"type":"label","id":"a1","parentId":null,"timestamp":"t","targetId":"x"}`, false, "", "", ""},
	}
	for _, tc := range tests {
		id, parent, fence, stop, ok := piPrefix([]byte(tc.line))
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.line, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if string(id) != tc.id || string(parent) != tc.parent || string(fence) != tc.fence || tc.line[stop] != '{' || tc.line[stop-len(`"message":`):stop] != `"message":` {
			t.Errorf("%s: id %s parent %s fence %s stop %d", tc.line, id, parent, fence, stop)
		}
	}
}
