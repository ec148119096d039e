package twin

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestWriteFoundParses: the test the twin writes for a minimised
// difference is Go source that parses, whatever bytes the names, values
// and replies hold, and it replays on the fleet it was found on.
func TestWriteFoundParses(t *testing.T) {
	dir := t.TempDir()
	odd := Name{Base: "t\x01", Form: Form{Lead: "\u00a0", Trail: "\t", Uni: 2, Pad: 130}}
	steps := []Step{
		{S: 0, Via: Proxy, Op: CreateDatabase{DB: odd}, Gen: "write:names"},
		{S: 1, Via: Both, Op: GetPartitionsByNames{DB: DBName{Name: odd, Cat: "@hive# "}, Table: N("tv"), Names: []string{"v=a%25", "v=\xff\"`"}}, Gen: "bynames"},
	}
	d := &Diff{Step: steps[1], Method: "get_partitions_by_names", Proxy: "{0:[\"\x00\xfe*/\"]}", Direct: "{0:[]}"}
	setup := Setup{Version: "3.1", Nodes: 3, Federation: "prefixed"}
	path, err := writeFound(Config{FoundDir: dir, Seed: 7}, setup, steps, d, 42)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ParseComments); err != nil {
		t.Fatalf("written test does not parse: %v\n%s", err, src)
	}
	if !strings.Contains(string(src), `twin.Setup{Version: "3.1", Nodes: 3, Federation: "prefixed"}`) {
		t.Errorf("written test does not replay on the fleet it was found on:\n%s", src)
	}
}
