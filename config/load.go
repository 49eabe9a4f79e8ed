package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is an invalid configuration value; Key is its dotted path.
type Error struct {
	Key  string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config: %s (line %d): %s", e.Key, e.Line, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Msg)
}

// Load reads the file at path over the defaults. getenv expands ${VAR}
// (os.Getenv when nil).
func Load(path string, getenv func(string) string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	cfg, err := Parse(f, getenv)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes YAML from r over the defaults, strictly.
func Parse(r io.Reader, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("config: read: %w", err)
	}
	cfg := Default()
	if len(bytes.TrimSpace(data)) == 0 {
		return cfg, nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if len(root.Content) == 0 {
		return cfg, nil
	}
	doc := root.Content[0]
	var missing []string
	expand(doc, getenv, &missing)
	if len(missing) > 0 {
		return Config{}, &Error{Key: missing[0], Msg: "environment variable is not set (use ${VAR:-default} for a default)"}
	}
	if err := checkKeys(doc, reflect.TypeOf(cfg), ""); err != nil {
		return Config{}, err
	}
	if err := doc.Decode(&cfg); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}

// expand replaces ${VAR} and ${VAR:-default} in scalar values.
func expand(n *yaml.Node, getenv func(string) string, missing *[]string) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = os.Expand(n.Value, func(name string) string {
			name, def, hasDef := strings.Cut(name, ":-")
			if v := getenv(name); v != "" {
				return v
			}
			if !hasDef {
				*missing = append(*missing, "${"+name+"}")
			}
			return def
		})
		if n.Tag == "" || n.Tag == "!!str" {
			n.Tag = ""
			n.Style = 0
		}
	}
	for _, c := range n.Content {
		expand(c, getenv, missing)
	}
}

// checkKeys rejects mapping keys that have no field in t, naming the key.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeOf(Duration(0)) {
			return nil
		}
		if n.Kind != yaml.MappingNode {
			if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
				return nil
			}
			return &Error{Key: trimDot(path), Line: n.Line, Msg: "expected a mapping"}
		}
		fields := map[string]reflect.Type{}
		for i := 0; i < t.NumField(); i++ {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if tag != "" && tag != "-" {
				fields[tag] = t.Field(i).Type
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				return &Error{Key: trimDot(path + "." + k.Value), Line: k.Line, Msg: "unknown key"}
			}
			if err := checkKeys(v, ft, path+"."+k.Value); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), path+"."+n.Content[i].Value); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func trimDot(s string) string { return strings.TrimPrefix(s, ".") }

// UnmarshalYAML reads "500ms", "10m" or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	if v, err := time.ParseDuration(s); err == nil {
		*d = Duration(v)
		return nil
	}
	var secs float64
	if _, err := fmt.Sscanf(s, "%g", &secs); err == nil {
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	return fmt.Errorf("line %d: %q is not a duration (e.g. 500ms, 10m)", n.Line, s)
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// ReadSecret returns value, or the trimmed content of file when value is
// empty. key names the setting in errors.
func ReadSecret(key, value, file string) (string, error) {
	if value != "" && file != "" {
		return "", &Error{Key: key, Msg: "set either " + key + " or " + key + "_file, not both"}
	}
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", &Error{Key: key + "_file", Msg: errors.Unwrap(err).Error() + ": " + file}
	}
	return strings.TrimSpace(string(b)), nil
}
