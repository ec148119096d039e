package proctest

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// TestStop: a process that exits on the signal is not killed; one that
// ignores it is killed once the grace has passed, not before.
func TestStop(t *testing.T) {
	for _, tc := range []struct {
		name       string
		script     string
		wantKilled bool
	}{
		{"exits on TERM", "echo ready; exec sleep 30", false},
		{"ignores TERM", "trap '' TERM; echo ready; while :; do sleep 0.05; done", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Start(t, "sh", exec.Command("sh", "-c", tc.script), syscall.SIGTERM, time.Second)
			if !wait.Until(10*time.Second, func() bool { return strings.Contains(p.Out.String(), "ready") }) {
				t.Fatal("the shell did not start")
			}
			took, killed := p.Stop(syscall.SIGTERM, 300*time.Millisecond)
			if killed != tc.wantKilled {
				t.Fatalf("killed = %v; want %v (took %v)", killed, tc.wantKilled, took)
			}
			if killed && took < 300*time.Millisecond {
				t.Fatalf("killed after %v; want the 300ms grace first", took)
			}
			if !p.Exited() || p.Err() == nil {
				t.Fatalf("after Stop: exited %v, err %v; want exited by a signal", p.Exited(), p.Err())
			}
			if again, k := p.Stop(syscall.SIGTERM, time.Second); again != 0 || k {
				t.Fatalf("second Stop took %v, killed %v; want nothing done", again, k)
			}
		})
	}
}
