package gateway

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// inEngine reports whether the file name is one of the session engine's:
// the owner of a session file, its locations, its queue, its run starter
// and its runs (owner*.go, run*.go), and the health its failed writes
// report to. Only they take the owner's lock and read or write a
// location's state; every other file goes through the owner's methods
// (owner_state.go).
func inEngine(name string) bool {
	return strings.HasPrefix(name, "owner") || strings.HasPrefix(name, "run") || name == "health.go"
}

// sealedFields are the engine's state no other file may touch, by type:
// the owner's lock and the state it guards.
var sealedFields = map[string][]string{
	"sessionFile": {"mu", "sess", "heads"},
	"owner":       {"locs"},
	"location":    {"run", "mode", "model", "branch", "waits", "allowed"},
}

// engineBreach is one reference to sealed state outside the engine.
type engineBreach struct {
	pos   token.Position
	field string
}

// engineBreaches type-checks the package's non-test files (imports left
// unresolved: only the package's own types matter) and lists every
// selector outside the engine's files (inEngine) that names a sealed
// field.
func engineBreaches(t *testing.T, dir string) []engineBreach {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{
		Importer: emptyImporter{},
		Error:    func(error) {}, // unresolved imports: their types stay invalid
	}
	pkg, _ := conf.Check("gateway", fset, files, info)
	sealed := map[types.Object]string{}
	for typ, fields := range sealedFields {
		obj := pkg.Scope().Lookup(typ)
		if obj == nil {
			t.Fatalf("type %s is gone: update sealedFields", typ)
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			t.Fatalf("type %s is not a struct", typ)
		}
		for _, name := range fields {
			found := false
			for i := range st.NumFields() {
				if f := st.Field(i); f.Name() == name {
					sealed[f] = typ + "." + name
					found = true
				}
			}
			if !found {
				t.Fatalf("field %s.%s is gone: update sealedFields", typ, name)
			}
		}
	}
	var out []engineBreach
	for sel, s := range info.Selections {
		field, ok := sealed[s.Obj()]
		if !ok {
			continue
		}
		pos := fset.Position(sel.Sel.Pos())
		if inEngine(filepath.Base(pos.Filename)) {
			continue
		}
		out = append(out, engineBreach{pos: pos, field: field})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].pos, out[j].pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	})
	return out
}

// emptyImporter gives every import an empty package.
type emptyImporter struct{}

func (emptyImporter) Import(path string) (*types.Package, error) {
	return nil, fmt.Errorf("not resolved: %s", path)
}

var _ types.Importer = emptyImporter{}

// TestEngineIsSealed fails when a file outside the session engine takes
// the owner's lock or touches a location's state directly.
func TestEngineIsSealed(t *testing.T) {
	breaches := engineBreaches(t, ".")
	per := map[string]int{}
	for _, b := range breaches {
		per[filepath.Base(b.pos.Filename)]++
		t.Errorf("%s:%d: %s outside the session engine", filepath.Base(b.pos.Filename), b.pos.Line, b.field)
	}
	if len(breaches) > 0 {
		t.Logf("%d outside references: %v", len(breaches), per)
	}
}

// TestEngineBoundaryCatches proves the boundary check can fail: a file
// outside the engine that locks the owner and reads a location's run is
// reported.
func TestEngineBoundaryCatches(t *testing.T) {
	dir := t.TempDir()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	bad := "package gateway\n\nfunc breach(o *owner, l *location) bool {\n\to.mu.Lock()\n\tdefer o.mu.Unlock()\n\treturn l.run != nil && len(o.locs) > 0\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "breach.go"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range engineBreaches(t, dir) {
		if filepath.Base(b.pos.Filename) == "breach.go" {
			got = append(got, fmt.Sprintf("%d:%s", b.pos.Line, b.field))
		}
	}
	want := []string{"4:sessionFile.mu", "5:sessionFile.mu", "6:location.run", "6:owner.locs"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("breaches in breach.go = %v, want %v", got, want)
	}
}
