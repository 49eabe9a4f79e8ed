package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const tok = "123456:ABCdefSECRET"
	s := New(tok)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "token", s)
	j, _ := json.Marshal(struct{ T Secret }{s})
	outs := []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), buf.String(), string(j)}
	for _, o := range outs {
		if strings.Contains(o, tok) {
			t.Errorf("secret leaked: %q", o)
		}
	}
	if s.Reveal() != tok {
		t.Fatalf("Reveal = %q", s.Reveal())
	}
	if got := Redact("url /bot"+tok+"/getMe", s); strings.Contains(got, tok) {
		t.Errorf("Redact left the token: %q", got)
	}
	if New("").String() != "" || !New("").IsZero() {
		t.Error("empty secret should print empty")
	}
}
