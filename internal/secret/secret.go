// Package secret holds credentials so that they cannot leak into logs or
// error messages by accident: a Secret prints as "REDACTED" through fmt,
// slog and encoding/json, and only Reveal returns the value.
package secret

import (
	"encoding/json"
	"log/slog"
	"strings"
)

// Secret is a credential. Its zero value is "no secret".
type Secret struct{ v string }

// New wraps a credential.
func New(v string) Secret { return Secret{v: v} }

// Reveal returns the credential itself. Call it only where the value is
// sent to the service it belongs to.
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether no credential is set.
func (s Secret) IsZero() bool { return s.v == "" }

const redacted = "REDACTED"

// String returns "REDACTED" (or "" when empty).
func (s Secret) String() string {
	if s.v == "" {
		return ""
	}
	return redacted
}

// GoString returns "REDACTED" for %#v.
func (s Secret) GoString() string { return s.String() }

// LogValue keeps the value out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON writes "REDACTED".
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// Redact replaces every occurrence of each non-empty secret in text with
// "REDACTED".
func Redact(text string, secrets ...Secret) string {
	for _, s := range secrets {
		if s.v != "" {
			text = strings.ReplaceAll(text, s.v, redacted)
		}
	}
	return text
}
