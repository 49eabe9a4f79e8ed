package tools

import (
	"errors"
	"testing"

	"github.com/pibot/pibot/tools/toolstest"
)

func TestAttach(t *testing.T) {
	dir := t.TempDir()
	if err := writeFile(dir+"/report.csv", "a,b\n"); err != nil {
		t.Fatal(err)
	}
	fake := &toolstest.Attacher{}
	s, err := New(t.Context(), Options{Workspace: dir, Attacher: fake})
	if err != nil {
		t.Fatal(err)
	}
	got, isErr, _ := call(t, s, "attach", `{"path":"report.csv"}`)
	if isErr || got != "Attached report.csv (4B) to the chat as report.csv." {
		t.Fatalf("got %q", got)
	}
	f := fake.Files()
	if len(f) != 1 || f[0].Name != "report.csv" || string(f[0].Data) != "a,b\n" || f[0].MimeType != "text/csv; charset=utf-8" {
		t.Errorf("files = %+v", f)
	}
	// attach never leaves the workspace, even without workspace_only.
	if got, isErr, _ := call(t, s, "attach", `{"path":"/etc/hostname"}`); !isErr {
		t.Errorf("attached a file outside the workspace: %q", got)
	}
	fake.Err = errors.New("upload refused")
	if got, _, _ := call(t, s, "attach", `{"path":"report.csv"}`); got != "Could not attach report.csv: upload refused" {
		t.Errorf("got %q", got)
	}
}
