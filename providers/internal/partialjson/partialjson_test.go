package partialjson

import "testing"

func TestRepair(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{`{"a":1}`, `{"a":1}`, true},
		{``, ``, false},
		{`{`, `{}`, true},
		{`{"com`, `{}`, true},
		{`{"command":"l`, `{"command":"l"}`, true},
		{`{"command":"ls"`, `{"command":"ls"}`, true},
		{`{"command":"ls",`, `{"command":"ls"}`, true},
		{`{"a":1,"b`, `{"a":1}`, true},
		{`{"a":1,"b":`, `{"a":1}`, true},
		{`{"a":1,"b":tr`, `{"a":1}`, true},
		{`{"a":[1,2`, `{"a":[1,2]}`, true},
		{`{"a":{"b":"x\`, `{"a":{"b":"x"}}`, true},
		{`{"a":"\u00`, `{"a":""}`, true},
		{`{"a":"q\"`, `{"a":"q\""}`, true},
	}
	for _, tt := range tests {
		got, ok := Repair(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Repair(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestObject(t *testing.T) {
	if got := string(Object(`[1,2`)); got != "{}" {
		t.Errorf("Object(array) = %s, want {}", got)
	}
	if got := string(Object(`{"x":"y`)); got != `{"x":"y"}` {
		t.Errorf("Object = %s", got)
	}
}
