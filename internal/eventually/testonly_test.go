package eventually

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// testOnly are the packages written for tests: helpers that must never ship
// in a binary.
var testOnly = []string{
	"internal/engine/enginetest",
	"internal/eventually",
	"internal/fakeclock",
	"internal/jwks/jwkstest",
	"internal/natsbus/natstest",
	"internal/postgres/pgtest",
	"internal/syncbuffer",
	"internal/tracing/tracingtest",
	"internal/uploads/s3test",
}

// TestOnlyTestsImport: outside the test-only packages themselves, only
// _test.go files import them.
func TestOnlyTestsImport(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	module := modulePath(t, root)
	isTestOnly := map[string]bool{}
	for _, p := range testOnly {
		isTestOnly[module+"/"+p] = true
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("test-only package %s: %v", p, err)
		}
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		if isTestOnly[module+"/"+filepath.ToSlash(rel)] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); isTestOnly[p] {
				t.Errorf("%s imports the test-only package %s", filepath.ToSlash(filepath.Join(rel, name)), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// moduleRoot is the directory of go.mod above this package.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func modulePath(t *testing.T, root string) string {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}
