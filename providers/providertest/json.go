package providertest

import (
	"encoding/json"
	"reflect"
	"strings"
)

// HasJSON reports whether the JSON document body contains fragment,
// ignoring key order and spacing. A fragment that is an object
// ({"k":v,...}) must equal some object in body; a list of members
// ("k":v,...) must all be present, with equal values, in one object.
// Numbers compare by value.
func HasJSON(body []byte, fragment string) bool {
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	fragment = strings.TrimSpace(fragment)
	exact := strings.HasPrefix(fragment, "{")
	if !exact {
		fragment = "{" + fragment + "}"
	}
	var want map[string]any
	if json.Unmarshal([]byte(fragment), &want) != nil {
		return false
	}
	return find(doc, want, exact)
}

func find(v any, want map[string]any, exact bool) bool {
	switch v := v.(type) {
	case map[string]any:
		if matches(v, want, exact) {
			return true
		}
		for _, c := range v {
			if find(c, want, exact) {
				return true
			}
		}
	case []any:
		for _, c := range v {
			if find(c, want, exact) {
				return true
			}
		}
	}
	return false
}

func matches(obj, want map[string]any, exact bool) bool {
	if exact {
		return reflect.DeepEqual(obj, want)
	}
	for k, w := range want {
		got, ok := obj[k]
		if !ok || !reflect.DeepEqual(got, w) {
			return false
		}
	}
	return true
}
