package providertest

import "testing"

func TestHasJSON(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":16384,"messages":[{"role":"tool","tool_call_id":"c1","content":"a.txt"},{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`)
	tests := []struct {
		frag string
		want bool
	}{
		{`"max_tokens":16384`, true},
		{`"max_tokens":16385`, false},
		{`"role":"tool","content":"a.txt"`, true},
		{`{"role":"tool","content":"a.txt","tool_call_id":"c1"}`, true},
		{`{"role":"tool","content":"a.txt"}`, false},
		{`"content":[{"cache_control":{"type":"ephemeral"},"text":"hi","type":"text"}]`, true},
		{`"content":[{"text":"hi","type":"text"}]`, false},
		{`"missing":true`, false},
		{`not json`, false},
	}
	for _, tt := range tests {
		if got := HasJSON(body, tt.frag); got != tt.want {
			t.Errorf("HasJSON(%s) = %v, want %v", tt.frag, got, tt.want)
		}
	}
	if HasJSON([]byte(`{bad`), `"a":1`) {
		t.Error("invalid body matched")
	}
}
