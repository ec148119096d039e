// Package proctest runs the processes of a test: the hmsproxy binary of
// the module under test, built once per test process, and child
// processes that end when the test does.
package proctest

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
	"github.com/hmsproxy/hmsproxy/internal/testenv/syncbuf"
)

var (
	buildMu  sync.Mutex // guards the fields below
	built    string     // the binary's path once built
	buildErr error
)

// Hmsproxy is ./cmd/hmsproxy of the module the test runs in, built once
// per test process ($GO, when set, is the go command) into a directory of
// its own, which Run deletes: a package whose tests call Hmsproxy runs
// them through Run from its TestMain.
func Hmsproxy(t testing.TB) string {
	t.Helper()
	root := module.Root(t)
	buildMu.Lock()
	defer buildMu.Unlock()
	if built == "" && buildErr == nil {
		buildErr = build(root)
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

func build(root string) error {
	dir, err := os.MkdirTemp("", "hmsproxy-bin-")
	if err != nil {
		return fmt.Errorf("build hmsproxy: %w", err)
	}
	bin := filepath.Join(dir, "hmsproxy")
	cmd := exec.Command(cmp.Or(os.Getenv("GO"), "go"), "build", "-o", bin, "./cmd/hmsproxy")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("go build ./cmd/hmsproxy: %v\n%s", err, out)
	}
	built = bin
	return nil
}

// Run runs the tests of m, then deletes what Hmsproxy built for them; it
// returns m.Run's exit code.
func Run(m *testing.M) int {
	defer removeBuilt()
	return m.Run()
}

func removeBuilt() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if built != "" {
		os.RemoveAll(filepath.Dir(built))
		built = ""
	}
}

// Proc is a child process that ends with the test.
type Proc struct {
	Cmd *exec.Cmd
	// Out is what the process wrote to stdout and stderr, unless the
	// caller set cmd's own writers.
	Out  *syncbuf.Buffer
	done chan struct{}
	err  error // Wait's, set before done closes
}

// Start starts cmd, known as name in failures. When the test ends the
// process is sent stop and, if it has not exited within grace, killed;
// its Out is logged if the test failed. os.Kill with no grace ends it at
// once.
func Start(t testing.TB, name string, cmd *exec.Cmd, stop os.Signal, grace time.Duration) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Out: &syncbuf.Buffer{}, done: make(chan struct{})}
	if cmd.Stdout == nil && cmd.Stderr == nil {
		cmd.Stdout, cmd.Stderr = p.Out, p.Out
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop(stop, grace)
		if t.Failed() && p.Out.String() != "" {
			t.Logf("%s output:\n%s", name, p.Out)
		}
	})
	return p
}

// Done is closed once the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned (nil for exit status 0);
// it is valid once Done is closed.
func (p *Proc) Err() error { return p.err }

// Stop sends sig and waits for the process to exit, killing it if it has
// not within grace. It returns how long the exit took and whether the
// process had to be killed. Stopping an exited process does nothing.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) (took time.Duration, killed bool) {
	if p.Exited() {
		return 0, false
	}
	start := time.Now()
	p.Cmd.Process.Signal(sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return time.Since(start), false
	case <-timer.C:
	}
	p.Cmd.Process.Kill()
	<-p.done
	return time.Since(start), true
}

// Metastore is a real Hive Metastore of the test bed, run by
// testbed/hms.sh from the cache it keeps.
type Metastore struct {
	Addr string
	Work string // its work directory: the database, its log
	root string // the module's, where testbed/ is
}

// PortOffset moves a test bed port by HMSPROXY_E2E_PORT_OFFSET, which lets
// two runs share a machine.
func PortOffset(port int) int {
	if off, err := strconv.Atoi(os.Getenv("HMSPROXY_E2E_PORT_OFFSET")); err == nil {
		port += off
	}
	return port
}

// StartMetastore starts metastore version v (2.3, 3.1 or 4.0) on
// loopback port, in a new work directory whose name holds name, with env
// added to the script's environment. It takes a minute or so: callers
// share one start between their tests, and Stop it at the end.
func StartMetastore(t testing.TB, name, v string, port int, env ...string) (*Metastore, error) {
	ms := &Metastore{Addr: fmt.Sprintf("127.0.0.1:%d", port), root: module.Root(t)}
	work, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return nil, fmt.Errorf("start HMS %s: %w", v, err)
	}
	ms.Work = work
	cmd := ms.script("start", v, strconv.Itoa(port), work)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(work)
		return nil, fmt.Errorf("start HMS %s on port %d: %v\n%s", v, port, err, out)
	}
	return ms, nil
}

// Stop stops the metastore and deletes its work directory, unless keep.
func (ms *Metastore) Stop(keep bool) {
	ms.script("stop", ms.Work).Run()
	if !keep {
		os.RemoveAll(ms.Work)
	}
}

func (ms *Metastore) script(args ...string) *exec.Cmd {
	return exec.Command("bash", append([]string{filepath.Join(ms.root, "testbed", "hms.sh")}, args...)...)
}
