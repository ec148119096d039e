package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
)

// docFile is the architecture page, relative to the module root.
const docFile = "docs/architecture.md"

// testenvFolder is the folder whose rank marks where test helpers may be
// imported from non-test code.
const testenvFolder = "internal/testenv"

// folder is one row of the layer table.
type folder struct {
	path string // relative to the module root, no trailing slash
	rank int
}

// pkg is what the test needs of `go list -json`.
type pkg struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Module       *struct{ Path string }
}

func TestImportsFollowLayers(t *testing.T) {
	root := module.Root(t)
	folders := readTable(t, filepath.Join(root, docFile))
	pkgs, modPath := listPackages(t, root)

	rel := func(p string) (string, bool) {
		if p == modPath {
			return "", true
		}
		r, ok := strings.CutPrefix(p, modPath+"/")
		return r, ok
	}
	used := map[string]bool{}
	of := func(r string) (folder, bool) {
		f, ok := folderOf(folders, r)
		if ok {
			used[f.path] = true
		}
		return f, ok
	}
	testenv, ok := folderOf(folders, testenvFolder)
	if !ok {
		t.Fatalf("%s: no row for %s/", docFile, testenvFolder)
	}

	for _, p := range pkgs {
		from, _ := rel(p.ImportPath)
		ff, ok := of(from)
		if !ok {
			t.Errorf("%s is in no folder of the table in %s; add a row", p.ImportPath, docFile)
			continue
		}
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			tf, ok := of(to)
			if !ok {
				continue // reported when the imported package itself is listed
			}
			if tf.path != ff.path && tf.rank >= ff.rank {
				t.Errorf("%s (%s/, rank %d) imports %s (%s/, rank %d); a package may import only its own folder and lower ranks",
					from, ff.path, ff.rank, to, tf.path, tf.rank)
			}
			if isTestHelper(to) && ff.rank < testenv.rank && !isTestHelper(from) {
				t.Errorf("%s imports the test helper %s outside a _test.go file", from, to)
			}
		}
		// _test.go imports are exempt from the rank rule (see docs/architecture.md),
		// but they must still name packages the table knows.
		for _, imp := range append(append([]string(nil), p.TestImports...), p.XTestImports...) {
			if to, ok := rel(imp); ok {
				of(to)
			}
		}
	}
	for _, f := range folders {
		if !used[f.path] {
			t.Errorf("%s: folder %s/ holds no package; remove its row or fix its path", docFile, f.path)
		}
	}
}

// isTestHelper reports whether the package at rel exists for tests only.
func isTestHelper(rel string) bool {
	return strings.HasSuffix(filepath.Base(rel), "test") ||
		rel == testenvFolder || strings.HasPrefix(rel, testenvFolder+"/")
}

// folderOf returns the row whose folder is the longest prefix of rel.
func folderOf(folders []folder, rel string) (folder, bool) {
	var best folder
	found := false
	for _, f := range folders {
		if rel == f.path || strings.HasPrefix(rel, f.path+"/") {
			if !found || len(f.path) > len(best.path) {
				best, found = f, true
			}
		}
	}
	return best, found
}

// readTable parses the "| folder | rank | its one job |" table of the doc.
func readTable(t *testing.T, name string) []folder {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var folders []folder
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		cells := splitRow(sc.Text())
		switch {
		case !in:
			in = len(cells) == 3 && cells[0] == "folder" && cells[1] == "rank"
		case cells == nil:
			in = false
		case strings.Trim(cells[0], "-: ") == "":
			// the separator row
		default:
			rank, err := strconv.Atoi(cells[1])
			if err != nil {
				t.Fatalf("%s: rank of %q: %v", docFile, cells[0], err)
			}
			path := strings.TrimSuffix(strings.Trim(cells[0], "`"), "/")
			folders = append(folders, folder{path: path, rank: rank})
		}
	}
	if len(folders) == 0 {
		t.Fatalf("%s: no \"| folder | rank | its one job |\" table", docFile)
	}
	sort.Slice(folders, func(i, j int) bool { return folders[i].path < folders[j].path })
	for i := 1; i < len(folders); i++ {
		if folders[i].path == folders[i-1].path {
			t.Fatalf("%s: folder %s/ has two rows", docFile, folders[i].path)
		}
	}
	return folders
}

// splitRow returns the trimmed cells of a Markdown table row, or nil.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil
	}
	cells := strings.Split(line[1:len(line)-1], "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// listPackages runs `go list -json ./...` at the module root.
func listPackages(t *testing.T, root string) ([]pkg, string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Module", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	module := ""
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Module != nil && module == "" {
			module = p.Module.Path
		}
		pkgs = append(pkgs, p)
	}
	if module == "" || len(pkgs) == 0 {
		t.Fatalf("go list found no packages of a module under %s", root)
	}
	return pkgs, module
}
