package proctest

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// startShell runs script, which says "ready" once it is set up.
func startShell(t *testing.T, script string) *Proc {
	t.Helper()
	p := Start(t, "sh", exec.Command("sh", "-c", script), syscall.SIGKILL, 0)
	if !wait.Until(10*time.Second, func() bool { return strings.Contains(p.Out.String(), "ready") }) {
		t.Fatalf("the shell did not start: %q", p.Out)
	}
	return p
}

// TestStopExits: a process that exits on the signal is not killed, and
// stopping it again does nothing.
func TestStopExits(t *testing.T) {
	p := startShell(t, "echo ready; exec sleep 30")
	if took, killed := p.Stop(syscall.SIGTERM, time.Minute); killed || took >= time.Minute {
		t.Fatalf("Stop took %v, killed %v; want an exit on SIGTERM", took, killed)
	}
	if !p.Exited() || p.Err() == nil {
		t.Fatalf("after Stop: exited %v, err %v; want exited by SIGTERM", p.Exited(), p.Err())
	}
	if took, killed := p.Stop(syscall.SIGTERM, time.Minute); took != 0 || killed {
		t.Fatalf("second Stop took %v, killed %v; want nothing done", took, killed)
	}
}

// TestStopKillsAfterGrace: a process that ignores the signal is killed
// once the grace has passed, not before.
func TestStopKillsAfterGrace(t *testing.T) {
	p := startShell(t, "trap '' TERM; echo ready; while :; do sleep 0.05; done")
	const grace = 300 * time.Millisecond
	took, killed := p.Stop(syscall.SIGTERM, grace)
	if !killed || took < grace {
		t.Fatalf("Stop took %v, killed %v; want killed after the %v grace", took, killed, grace)
	}
	if !p.Exited() {
		t.Fatal("not exited after Stop")
	}
}
