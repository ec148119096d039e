package layout

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
)

// maxLines is the longest a non-test function may be, counted from `func`
// to its closing brace (issue 23). This covers the whole module;
// cmd/hmsproxy holds itself to 80 lines in its own TestFunctionLength.
const maxLines = 150

// list, when above zero, makes the test log every function at least that
// long: go test ./internal/testenv/layout -run NoLong -v -args -funclen.list 80
var list = flag.Int("funclen.list", 0, "log every non-test function of at least this many lines")

// fn is one function and its length in lines.
type fn struct {
	file  string // relative to the module root, with forward slashes
	line  int    // of `func`
	name  string // "Name" or "Recv.Name"
	lines int
}

func (f fn) pos() string { return fmt.Sprintf("%s:%d", f.file, f.line) }

func TestNoLongFunctions(t *testing.T) {
	root := module.Root(t)
	fns := functions(t, root)
	if len(fns) == 0 {
		t.Fatalf("found no functions under %s", root)
	}
	for _, f := range fns {
		if f.lines > maxLines {
			t.Errorf("%s: %s is %d lines; want at most %d (split it along its steps, or hoist a table literal to a package-level var)", f.pos(), f.name, f.lines, maxLines)
		}
		if *list > 0 && f.lines >= *list {
			t.Logf("%4d %s %s", f.lines, f.pos(), f.name)
		}
	}
}

// functions parses every non-test .go file below root and returns its
// functions, longest first. Function literals count where they stand at
// package level; inside a function they are part of its length.
func functions(t *testing.T, root string) []fn {
	t.Helper()
	fset := token.NewFileSet()
	var fns []fn
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(file) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		add := func(name string, from, to token.Pos) {
			start, end := fset.Position(from), fset.Position(to)
			fns = append(fns, fn{file: filepath.ToSlash(rel), line: start.Line, name: name, lines: end.Line - start.Line + 1})
		}
		for _, decl := range file.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				add(funcName(decl), decl.Pos(), decl.End())
			case *ast.GenDecl:
				ast.Inspect(decl, func(n ast.Node) bool {
					if lit, ok := n.(*ast.FuncLit); ok {
						add("func literal", lit.Pos(), lit.End())
						return false
					}
					return true
				})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(fns, func(i, j int) bool {
		if fns[i].lines != fns[j].lines {
			return fns[i].lines > fns[j].lines
		}
		return fns[i].pos() < fns[j].pos()
	})
	return fns
}

// funcName is "Name" or "Recv.Name".
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	typ := d.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}
