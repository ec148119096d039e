// Package kafkatest runs a real Apache Kafka broker (KRaft, from
// testbed/kafka.sh) on loopback for tests.
package kafkatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hmsproxy/hmsproxy/internal/testenv/module"
	"github.com/hmsproxy/hmsproxy/internal/testenv/wait"
)

// SASL is the user and password of the broker's SASL_PLAINTEXT listener
// (mechanism PLAIN), which testbed/kafka.sh configures.
const (
	SASLUser     = "hmsproxy"
	SASLPassword = "hmsproxy-secret"
)

// Broker is one broker process.
type Broker struct {
	Addr     string // PLAINTEXT listener, host:port
	SASLAddr string // SASL_PLAINTEXT listener (PLAIN), host:port
	SSLAddr  string // TLS listener, host:port
	// CAFile is the PEM certificate of the TLS listener, self-signed for
	// 127.0.0.1 and localhost.
	CAFile string
	script string
	work   string
	port   int
	env    []string

	mu      sync.Mutex // guards running
	running bool
}

var (
	sharedMu  sync.Mutex // guards shared and sharedErr
	shared    *Broker
	sharedErr error
)

// Shared returns the test process's broker, started on first use and
// stopped by Main: one JVM start (seconds) for every test of a package.
// Tests that stop the broker take their own with Start.
func Shared(t testing.TB) *Broker {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		dir, err := os.MkdirTemp("", "hmsproxy-kafka-")
		if err != nil {
			t.Fatal(err)
		}
		shared, sharedErr = launch(module.Root(t), dir)
	}
	if sharedErr != nil {
		t.Fatalf("kafkatest: %v", sharedErr)
	}
	return shared
}

// Main runs a package's tests and stops the shared broker after them:
// call it from TestMain as os.Exit(kafkatest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.stop()
		os.RemoveAll(shared.work)
	}
	sharedMu.Unlock()
	return code
}

// Start runs a broker of the test's own, stopped at its end.
func Start(t testing.TB) *Broker {
	t.Helper()
	b, err := launch(module.Root(t), t.TempDir())
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(b.stop)
	return b
}

func launch(root, work string) (*Broker, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("java not found; run scripts/deps.sh (make test does): %w", err)
	}
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	b := &Broker{script: filepath.Join(root, "testbed", "kafka.sh"), work: work, port: ports[0],
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), SASLAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])),
		SSLAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3])), CAFile: filepath.Join(work, "ssl", "cert.pem"),
		env: []string{"KAFKA_CONTROLLER_PORT=" + strconv.Itoa(ports[1]), "KAFKA_SASL_PORT=" + strconv.Itoa(ports[2]),
			"KAFKA_SSL_PORT=" + strconv.Itoa(ports[3]),
			// A test binary that panics runs no cleanup: the broker goes
			// with it all the same.
			"KAFKA_OWNER_PID=" + strconv.Itoa(os.Getpid())}}
	if err := b.start(); err != nil {
		return nil, err
	}
	return b, nil
}

// Stop stops the broker, keeping its data: Restart brings the same
// topics and records back. For an outage test.
func (b *Broker) Stop(t testing.TB) {
	t.Helper()
	b.stop()
}

// Restart starts the stopped broker again on the same ports and data.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	if err := b.start(); err != nil {
		t.Fatalf("kafkatest: restart: %v", err)
	}
}

func (b *Broker) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	cmd := exec.Command("bash", b.script, "start", b.work, strconv.Itoa(b.port))
	cmd.Env = append(os.Environ(), b.env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kafka.sh start: %w\n%s", err, out)
	}
	b.running = true
	// The port opens before the broker has joined its own quorum:
	// wait until it answers metadata, so the first produce of a test
	// does not race the start-up.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	if wait.Poll(60*time.Second, 100*time.Millisecond, func() bool { err = cl.Ping(ctx); return err == nil }) {
		return nil
	}
	return fmt.Errorf("broker on %s did not answer: %w", b.Addr, err)
}

func (b *Broker) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.running {
		return
	}
	b.running = false
	exec.Command("bash", b.script, "stop", b.work).Run()
}

// Topic creates a fresh topic of partitions partitions for one test and
// returns its name. The producers under test do not create topics: an
// operator does, as here.
func (b *Broker) Topic(t testing.TB, partitions int32) string {
	t.Helper()
	name := fmt.Sprintf("hmsproxy-test-%d-%d", time.Now().UnixNano(), os.Getpid())
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 30_000
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("kafkatest: create topic %s: %v", name, err)
	}
	return name
}

// Consume reads every record of topic from the start until want records
// came or ctx ends, and returns them.
func (b *Broker) Consume(ctx context.Context, topic string, want int) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("kafkatest: %d of %d records: %w", len(out), want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
