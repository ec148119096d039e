package main

import (
	"bufio"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
)

// TestEveryMetricFamilyDocumented fails when a metric family the proxy
// can export is missing from the metrics table of the README or of a
// page in docs/, and when that table names a family nothing exports
// (issue 23).
//
// Families come from two places, since the admin server leaves out the
// families of sources that are not configured (no Redis, no Kerberos,
// no federation ...): what the real binary serves on /metrics in demo
// mode, and every descriptor the module's code declares (a
// prometheus.NewDesc or an Opts Name of "hmsproxy_..."). The scrape
// proves the declarations found are the ones served; the declarations
// cover what one demo run cannot switch on.
func TestEveryMetricFamilyDocumented(t *testing.T) {
	root := module.Root(t)
	documented := documentedFamilies(t, root)
	if len(documented) == 0 {
		t.Fatal("no metrics table found in README.md or docs/*.md (rows whose first cell names `hmsproxy_...`)")
	}
	declared := declaredFamilies(t, root)
	scraped := scrapedFamilies(t)

	for name := range scraped {
		if !declared[name] {
			t.Errorf("%s is served on /metrics but no NewDesc/Name declaration was found; the source scan misses a way of declaring metrics", name)
		}
	}
	var missing []string
	for name := range declared {
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	for _, name := range missing {
		t.Errorf("metric family %s is not in the metrics table (README.md or docs/*.md); add a row: | `%s` | type | labels (values) | meaning |", name, name)
	}
	for name := range documented {
		if !declared[name] && !scraped[name] {
			t.Errorf("the metrics table documents %s, which nothing declares any more; remove or rename its row", name)
		}
	}
	t.Logf("%d families declared, %d served in demo mode, %d documented", len(declared), len(scraped), len(documented))
}

var familyName = regexp.MustCompile("hmsproxy_[a-z0-9_]+")

// documentedFamilies reads the families named in the first cell of the
// Markdown table rows of README.md and docs/*.md.
func documentedFamilies(t *testing.T, root string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	out := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "| `hmsproxy_") {
				continue
			}
			first, _, _ := strings.Cut(line[1:], "|")
			for _, name := range familyName.FindAllString(first, -1) {
				out[name] = true
			}
		}
	}
	return out
}

var declaration = regexp.MustCompile(`(?:NewDesc\(|Name:\s*)"(hmsproxy_[a-z0-9_]+)"`)

// declaredFamilies scans the module's non-test Go files for metric
// descriptors.
func declaredFamilies(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".cache", "bin", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range declaration.FindAllSubmatch(b, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no metric declarations found in the module")
	}
	return out
}

// scrapedFamilies runs the binary in demo mode and reads the family
// names of its /metrics (# TYPE lines).
func scrapedFamilies(t *testing.T) map[string]bool {
	t.Helper()
	p := startBinary(t, "--demo", "--admin", "127.0.0.1:0")
	if p.admin == "" {
		t.Fatal("the demo binary logged no admin address")
	}
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" && strings.HasPrefix(f[2], "hmsproxy_") {
			out[f[2]] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("/metrics served no hmsproxy_ family")
	}
	return out
}
