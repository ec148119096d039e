// Package redistest runs a real redis-server on loopback for tests.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process owned by a test.
type Server struct {
	Addr string
	port int
	dir  string
	cmd  *exec.Cmd
	t    testing.TB
	args []string // beyond port, bind and persistence
}

// Start runs redis-server on a free loopback port; the test fails when
// the binary is missing (make test installs it).
func Start(t testing.TB) *Server {
	t.Helper()
	return StartArgs(t)
}

// StartArgs is Start with more redis-server arguments (a replica's
// --replicaof, a cluster node's --cluster-enabled yes).
func StartArgs(t testing.TB, args ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redistest: redis-server not found; run scripts/deps.sh (make test does)")
	}
	port := freePort(t)
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), port: port, dir: t.TempDir(), t: t, args: args}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", ""}, s.args...)
	s.cmd = exec.Command("redis-server", args...)
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	if !wait.Poll(10*time.Second, 20*time.Millisecond, func() bool { return c.Ping(context.Background()).Err() == nil }) {
		s.t.Fatal("redistest: redis-server did not answer within 10s")
	}
}

// Stop kills the server (like a crash: no shutdown save). Safe twice.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(os.Kill)
	s.cmd.Wait()
	s.cmd = nil
}

// Freeze stops the server's process (SIGSTOP) until Thaw: connections
// stay open and calls hang, as with a server stuck in a long command or
// on a host that stopped answering. Stop still kills it.
func (s *Server) Freeze() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
}

// Thaw lets a frozen server run again.
func (s *Server) Thaw() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatal(err)
	}
}

// Restart starts the server again on the same port, empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Client returns a client for the server, closed with the test.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	s.t.Cleanup(func() { c.Close() })
	return c
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
