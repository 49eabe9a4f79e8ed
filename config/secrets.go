package config

import (
	"net/url"
	"os"
	"reflect"
	"sort"
	"strings"
)

// Secret is one credential the configuration holds. Every key that may
// hold one says so with a struct tag: secret:"value" (the value, or each
// value of a map, is a credential), secret:"file" (a *_file key: the file
// holds one) or secret:"url" (the URL's password and query values are
// credentials). A test checks that every key named like a credential is
// tagged.
type Secret struct {
	// Key is the key that holds it, e.g. http.metrics_token,
	// providers.openai.headers.Authorization or
	// adapters.telegram.token_file.
	Key string
	// Value is the credential; for a *_file key, the file's trimmed
	// content when it could be read ("" otherwise).
	Value string
	// File is the file named by a *_file key, "" for other keys.
	File string
}

// Secrets returns every credential in c, in key order: what pibot removes
// from its environment (so that tools, hooks and MCP servers never see
// it) and the files its tools must never reach. Unset keys are left out.
func (c Config) Secrets() []Secret {
	var out []Secret
	walkSecrets(reflect.ValueOf(c), "", &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// walkSecrets collects the tagged fields below v (at key path) into out.
func walkSecrets(v reflect.Value, path string, out *[]Secret) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			walkSecrets(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			key := join(path, name)
			if kind := f.Tag.Get("secret"); kind != "" {
				collect(v.Field(i), key, kind, out)
				continue
			}
			walkSecrets(v.Field(i), key, out)
		}
	case reflect.Map:
		keys := v.MapKeys()
		for _, k := range keys {
			if k.Kind() == reflect.String {
				walkSecrets(v.MapIndex(k), join(path, k.String()), out)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkSecrets(v.Index(i), path, out)
		}
	}
}

// collect adds the credentials of one tagged field.
func collect(v reflect.Value, key, kind string, out *[]Secret) {
	if v.Kind() == reflect.Map {
		for _, k := range v.MapKeys() {
			collect(v.MapIndex(k), join(key, k.String()), kind, out)
		}
		return
	}
	if v.Kind() != reflect.String || v.String() == "" {
		return
	}
	s := v.String()
	switch kind {
	case "file":
		sec := Secret{Key: key, File: s}
		if b, err := os.ReadFile(s); err == nil {
			sec.Value = strings.TrimSpace(string(b))
		}
		*out = append(*out, sec)
	case "url":
		u, err := url.Parse(s)
		if err != nil {
			*out = append(*out, Secret{Key: key, Value: s}) // unreadable: all of it
			return
		}
		if p, ok := u.User.Password(); ok && p != "" {
			*out = append(*out, Secret{Key: key, Value: p})
		}
		for _, vals := range u.Query() {
			for _, q := range vals {
				if q != "" {
					*out = append(*out, Secret{Key: key, Value: q})
				}
			}
		}
	default:
		*out = append(*out, Secret{Key: key, Value: s})
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
