package proxy

import (
	"os"
	"regexp"
	"testing"
)

// TestPruneStepsNamed: every step at which pruneRead gives up has its
// own result, so hmsproxy_prune_total says why a prune was forwarded;
// a step missing from pruneSteps would be counted as raced.
func TestPruneStepsNamed(t *testing.T) {
	src, err := os.ReadFile("prune.go")
	if err != nil {
		t.Fatal(err)
	}
	steps := regexp.MustCompile(`pruneFallback\("([^"]+)"`).FindAllSubmatch(src, -1)
	if len(steps) < len(pruneSteps) {
		t.Fatalf("found %d pruneFallback steps in prune.go; want at least the %d of pruneSteps", len(steps), len(pruneSteps))
	}
	for _, s := range steps {
		if _, ok := pruneSteps[string(s[1])]; !ok {
			t.Errorf("pruneFallback step %q has no PruneResult in pruneSteps", s[1])
		}
	}
	seen := map[string]bool{}
	for _, r := range PruneResults() {
		name := r.String()
		if name == "unknown" || seen[name] || !regexp.MustCompile(`^[a-z_]+$`).MatchString(name) {
			t.Errorf("result %d: label %q is not a distinct snake_case name", r, name)
		}
		seen[name] = true
	}
}
