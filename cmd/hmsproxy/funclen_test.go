package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestFunctionLength (issue 23): no function of the command, or of its
// settings (cmd/internal/settings, moved out of it), is over 80 lines, so
// that each can be read at once; run and load were 300.
func TestFunctionLength(t *testing.T) {
	var files []string
	for _, pattern := range []string{"*.go", "../internal/settings/*.go"} {
		fs, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > 80 {
					t.Errorf("%s: %s is %d lines; want at most 80", f, fd.Name.Name, n)
				}
			}
		}
	}
}
