package web_test

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

// Handlers change state through activities/changes alone: no file of the
// API (outside its test harnesses) imports the Temporal client.
func TestAPIDoesNotCallTemporal(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(path, "apitest") || strings.Contains(path, "cjtest") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "go.temporal.io/sdk/client" || strings.HasPrefix(p, "go.temporal.io/api/workflowservice") {
				t.Errorf("%s imports %s: go through activities/changes", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Transactions live below the API too: no file of it opens one itself
// (RunInTx) or passes its own work to changes.Commit; a handler calls one
// named function of activities/changes (or of models for a plain record).
func TestAPIOpensNoTransaction(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(path, "apitest") || strings.Contains(path, "cjtest") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), ".RunInTx(") {
			t.Errorf("%s opens a transaction: call a function of activities/changes (or of models)", path)
		}
		if strings.Contains(string(src), ".Commit(") {
			t.Errorf("%s commits its own change: move it into a function of activities/changes", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
