package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
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
	if err := inheritAgents(doc, &cfg); err != nil {
		return Config{}, err
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

// checkKeys rejects mapping keys that have no field in t and values that
// do not decode into their field's type, naming the key: a decode error of
// the whole document gives only a line.
func checkKeys(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return checkLeaf(n, t, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return &Error{Key: trimDot(path), Line: n.Line, Msg: "expected a mapping of keys, got " + describe(n)}
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
				msg := "unknown key"
				if to, ok := renamed[trimDot(path+"."+k.Value)]; ok {
					return &Error{Key: trimDot(path + "." + k.Value), Line: k.Line, Msg: msg + "; " + to}
				}
				known := make([]string, 0, len(fields))
				for f := range fields {
					known = append(known, f)
				}
				if s := suggest(k.Value, known); s != "" {
					msg += "; did you mean " + trimDot(path+"."+s) + "?"
				}
				return &Error{Key: trimDot(path + "." + k.Value), Line: k.Line, Msg: msg}
			}
			if err := checkKeys(v, ft, path+"."+k.Value); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return &Error{Key: trimDot(path), Line: n.Line, Msg: "expected a mapping, got " + describe(n)}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKeys(n.Content[i+1], t.Elem(), path+"."+n.Content[i].Value); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return &Error{Key: trimDot(path), Line: n.Line, Msg: "expected a list, got " + describe(n)}
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Interface:
		// Free-form (compat): checked by its consumer.
	default:
		return checkLeaf(n, t, path)
	}
	return nil
}

// renamed says what became of keys that were renamed or replaced.
var renamed = map[string]string{
	"agent.skills_dirs": "it is agent.skills now (the operator's skill folders); the workspace's .pi/skills is read only with agent.workspace_pi: true",
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkLeaf decodes a single value into a fresh t.
func checkLeaf(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.ScalarNode {
		return &Error{Key: trimDot(path), Line: n.Line, Msg: "expected " + want(t) + ", got " + describe(n)}
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return &Error{Key: trimDot(path), Line: n.Line, Msg: fmt.Sprintf("%q is not %s", n.Value, want(t))}
	}
	return &Error{Key: trimDot(path), Line: n.Line, Msg: trimLinePrefix(err.Error())}
}

// want describes what a value of type t looks like.
func want(t reflect.Type) string {
	if t == reflect.TypeFor[Duration]() {
		return "a duration like 30s"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a single value"
}

// describe names the kind of node n for an error.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

func trimDot(s string) string { return strings.TrimPrefix(s, ".") }

// UnmarshalYAML reads Go duration syntax ("500ms", "10m", "1h30m") or a
// plain number of seconds ("90", "1.5"); anything else, such as
// "3 minutes", is an error rather than a guess.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// ParseDuration reads Go duration syntax or a plain number of seconds.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if v, err := time.ParseDuration(t); err == nil {
		return v, nil
	}
	if secs, err := strconv.ParseFloat(t, 64); err == nil && isPlainNumber(t) &&
		math.Abs(secs) < float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(secs * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%q is not a duration: write a number with a unit, such as 500ms, 90s, 10m or 1h30m (a plain number means seconds)", s)
}

// isPlainNumber reports whether s is digits with an optional sign and
// decimal point (no exponent, hex, Inf or NaN).
func isPlainNumber(s string) bool {
	s = strings.TrimLeft(s, "+-")
	return s != "" && strings.Trim(s, "0123456789.") == "" && strings.Count(s, ".") <= 1 && s != "."
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
