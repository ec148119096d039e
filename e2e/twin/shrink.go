package twin

import (
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Minimising a difference: the steps before it are cut down to those
// that touch what it touched, then delta debugging drops every step it
// can while a replay, in order and on freshly started proxies, still
// ends in a difference at the last step. What is left is written out as
// a test that replays it.

// shrinkAll minimises the first differences of distinct methods and
// writes a test file for each; it returns the files.
func shrinkAll(t testing.TB, r *runner, cfg Config) []string {
	var files []string
	seen := map[string]bool{}
	for _, d := range r.diffs {
		if len(files) >= cfg.MaxShrunk || d.Fallout || d.Index < 0 || d.Index >= len(r.history) {
			continue
		}
		// One per method and generator: a class of difference.
		class := d.Method + " " + d.Step.Gen
		if seen[class] {
			continue
		}
		seen[class] = true
		steps, last, ok := shrink(r, d, cfg.Shrink)
		if !ok {
			fmt.Printf("twin: %s: not reproduced by an ordered replay (timing); kept the run's log only\n", d.Method)
			continue
		}
		f, err := writeFound(cfg, Setup{Version: r.ms.Version, Nodes: len(r.fleet.Nodes), Federation: cfg.Federation}, steps, last, d.Index)
		if err != nil {
			t.Errorf("twin: write test file: %v", err)
			continue
		}
		fmt.Printf("twin: minimised %s to %d steps: %s\n", d.Method, len(steps), f)
		for _, st := range steps {
			fmt.Printf("twin:   %s\n", stepSource(st))
		}
		files = append(files, f)
	}
	return files
}

// shrink returns a minimal sequence that ends in a difference of the
// same method at its last step, and that difference.
func shrink(r *runner, d *Diff, budget time.Duration) ([]Step, *Diff, bool) {
	deadline := time.Now().Add(budget)
	i := d.Index
	target := r.history[i]
	// A crash may depend on what the process went through; anything else
	// is replayed in a namespace of its own on the running nodes.
	restart := d.Method == "process"
	// try replays steps; for a crash, the steps are cut after the one it
	// followed.
	try := func(steps *[]Step) *Diff {
		if restart {
			r.fleet.Restart()
		}
		got := replay(r.ms, r.fleet, *steps, newNamespace())
		switch {
		case got == nil || got.Fallout || got.Method != d.Method || got.Kinds != d.Kinds:
			return nil
		case got.Index != len(*steps)-1 && !restart:
			return nil
		}
		*steps = (*steps)[:got.Index+1]
		return got
	}
	// Candidates from the smallest: the step alone; with the creations
	// of what it touches and its session's state; with everything that
	// touches what it touches; the run's last steps.
	var last *Diff
	var cand []Step
	for _, c := range [][]Step{
		{target},
		creations(r.history[:i], r.at[:i], target, r.at[i]),
		relevant(r.history[:i], r.at[:i], target, r.at[i]),
		withWaits(r.history[max(0, i-3000):i+1], r.at[max(0, i-3000):i+1]),
	} {
		if last = try(&c); last != nil {
			cand = c
			break
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if last == nil {
		return nil, nil, false
	}
	// ddmin over all but the failing step.
	body, tail := cand[:len(cand)-1], cand[len(cand)-1]
	n := 2
	for len(body) >= 1 && time.Now().Before(deadline) {
		chunk := (len(body) + n - 1) / n
		reduced := false
		for start := 0; start < len(body) && time.Now().Before(deadline); start += chunk {
			end := min(len(body), start+chunk)
			next := append(append(append([]Step(nil), body[:start]...), body[end:]...), tail)
			if got := try(&next); got != nil {
				body, tail, last, reduced = next[:len(next)-1], next[len(next)-1], got, true
				n = max(n-1, 2)
				break
			}
		}
		if !reduced {
			if chunk == 1 {
				break
			}
			n = min(2*n, len(body))
		}
	}
	return append(body, tail), last, true
}

// creations keeps, of the steps before the failing one, those that
// create what it touches, and the session steps of its session.
func creations(hist []Step, at []time.Time, target Step, targetAt time.Time) []Step {
	want := target.Op.Touches()
	var keep []Step
	var keepAt []time.Time
	for j, st := range hist {
		ok := st.S == target.S && st.Op.Class() == Session
		switch st.Op.(type) {
		case CreateDatabase, CreateTable, AddPartitions, CreateFunction:
			ok = ok || overlapsAny(want, st.Op.Touches())
		}
		if ok {
			keep = append(keep, st)
			keepAt = append(keepAt, at[j])
		}
	}
	return withWaits(append(keep, target), append(keepAt, targetAt))
}

// relevant keeps, of the steps before the failing one, those that touch
// a database it touches (or every database), and the session steps of
// its sessions, with the pauses between them.
func relevant(hist []Step, at []time.Time, target Step, targetAt time.Time) []Step {
	want := target.Op.Touches()
	var keep []Step
	var keepAt []time.Time
	for j, st := range hist {
		// Session calls, locks and transactions name no database.
		if len(st.Op.Touches()) == 0 || overlapsAny(want, st.Op.Touches()) {
			keep = append(keep, st)
			keepAt = append(keepAt, at[j])
		}
	}
	if len(keep) > 1500 {
		keep, keepAt = keep[len(keep)-1500:], keepAt[len(keepAt)-1500:]
	}
	return withWaits(append(keep, target), append(keepAt, targetAt))
}

// withWaits keeps the pauses of more than a second between steps, up to
// a minute: expiry and staleness bounds depend on them.
func withWaits(steps []Step, at []time.Time) []Step {
	out := make([]Step, len(steps))
	copy(out, steps)
	for i := 1; i < len(out); i++ {
		if gap := at[i].Sub(at[i-1]); gap > time.Second {
			out[i].Wait = min(gap, time.Minute).Round(100 * time.Millisecond)
		} else {
			out[i].Wait = 0
		}
	}
	if len(out) > 0 {
		out[0].Wait = 0
	}
	return out
}

// stepSource is a step as Go source.
func stepSource(st Step) string {
	s := fmt.Sprintf("%#v", st)
	// %#v writes Via and durations as numbers; name them.
	s = regexp.MustCompile(`Via:0x([0-9a-f]+)`).ReplaceAllStringFunc(s, func(m string) string {
		switch m {
		case "Via:0x1":
			return "Via:twin.Proxy"
		case "Via:0x2":
			return "Via:twin.Direct"
		}
		return "Via:twin.Both"
	})
	return s
}

var foundName = regexp.MustCompile(`[^A-Za-z0-9]+`)

// writeFound writes a test that replays steps.
func writeFound(cfg Config, setup Setup, steps []Step, d *Diff, at int) (string, error) {
	dir := cfg.FoundDir
	if dir == "" {
		dir = filepath.Join(repoRoot(), "e2e", "twin")
	}
	version := foundName.ReplaceAllString(setup.Version, "")
	name := fmt.Sprintf("Found%sSeed%dOp%d", version, cfg.Seed, at)
	var b strings.Builder
	fmt.Fprintf(&b, "package twin_test\n\n")
	fmt.Fprintf(&b, "import (\n\t\"testing\"\n\n\t\"github.com/hmsproxy/hmsproxy/e2e/twin\"\n)\n\n")
	fmt.Fprintf(&b, "// Test%s was written by the twin (seed %d, %+v).\n", name, cfg.Seed, setup)
	for _, line := range strings.Split(wrapComment(d.String()), "\n") {
		fmt.Fprintf(&b, "// %s\n", line)
	}
	fmt.Fprintf(&b, "func Test%s(t *testing.T) {\n\ttwin.Replay(t, %#v, []twin.Step{\n", name, setup)
	for _, st := range steps {
		fmt.Fprintf(&b, "\t\t%s,\n", strings.TrimPrefix(stepSource(st), "twin.Step"))
	}
	fmt.Fprintf(&b, "\t})\n}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return "", fmt.Errorf("twin: the test it wrote does not parse: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("found_%s_%d_%d_test.go", version, cfg.Seed, at))
	return path, os.WriteFile(path, src, 0o644)
}

func wrapComment(s string) string {
	// Go source must be valid UTF-8; a comment holds no control bytes.
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	const width = 100
	var lines []string
	for len(s) > width {
		cut := strings.LastIndexByte(s[:width], ' ')
		if cut <= 0 {
			cut = width
		}
		lines = append(lines, s[:cut])
		s = strings.TrimLeft(s[cut:], " ")
	}
	return strings.Join(append(lines, s), "\n")
}
