package trace

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a Recorder. The zero value of each field selects the
// default in its comment; Path is required.
type Config struct {
	// Path is the file being written; rotated files sit beside it.
	Path string
	// FileBytes rotates the file once it holds this many bytes. Default
	// 64 MiB.
	FileBytes int64
	// MaxBytes bounds the recording's files together: the oldest rotated
	// files are removed while the set is larger. Default 1 GiB; at least
	// FileBytes.
	MaxBytes int64
	// BufferBytes bounds the records waiting for the disk. A call that
	// finds no room is recorded without its args if that fits, and
	// dropped (counted) if not: a slow disk never holds up a client.
	// Default 8 MiB.
	BufferBytes int
	// Redact says what is kept of names. Default RedactOff.
	Redact Redaction
	// Key is the key of the name hashes (RedactNames, RedactBodies): one
	// key gives the same hash to the same name in every recording.
	// Default: random per Recorder, so hashes match within its files only.
	Key []byte
	// Logger receives the recorder's logs. Default: discard.
	Logger *slog.Logger

	// fs opens, renames and removes files; a seam for tests only (a slow
	// or failing disk). Default: the os package.
	fs fileSystem
}

// Default bounds; see Config.
const (
	DefaultFileBytes   = 64 << 20
	DefaultMaxBytes    = 1 << 30
	DefaultBufferBytes = 8 << 20
)

// fileSystem is what the writer does to files.
type fileSystem interface {
	Create(name string) (io.WriteCloser, error)
	Rename(from, to string) error
	Remove(name string) error
	Size(name string) (int64, bool)
}

type osFS struct{}

func (osFS) Create(name string) (io.WriteCloser, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // names are sensitive: owner only
}
func (osFS) Rename(from, to string) error { return os.Rename(from, to) }
func (osFS) Remove(name string) error     { return os.Remove(name) }
func (osFS) Size(name string) (int64, bool) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, false
	}
	return fi.Size(), true
}

// Stats are a recorder's counts since it was made.
type Stats struct {
	// Recorded: calls written to the file; Elided: of them, those
	// written without their args for lack of buffer room; Dropped: calls
	// not written at all (no buffer room, or a failed write).
	Recorded, Elided, Dropped uint64
	// Bytes written, and the files begun (the first one included).
	Bytes        uint64
	FilesStarted uint64
	// WriteErrors counts failed writes, renames and removals.
	WriteErrors uint64
	// Recording: calls are being recorded now.
	Recording bool
	// Until is when the recording stops by itself; zero: not by itself.
	Until time.Time
}

// Recorder writes calls to a rotating, size-bounded trace file. Record
// never blocks on the disk: records wait in a bounded buffer for the
// writer goroutine, which Close stops.
type Recorder struct {
	cfg   Config
	flags uint16
	log   *slog.Logger
	on    atomic.Bool

	scratch sync.Pool // *[]byte: a call's redacted args

	mu sync.Mutex // guards buf, pending, start, until, timer, closed
	// buf holds encoded records for the writer, pending how many.
	buf     []byte
	pending int
	// start is the current file's Header.Start; zero: no file begun.
	start  time.Time
	until  time.Time
	timer  *time.Timer
	closed bool

	wake chan struct{} // a record is waiting (cap 1)
	// flush asks the writer to write what waits, close the file and
	// answer on the channel it sends (Stop).
	flush chan chan struct{}
	quit  chan struct{} // closed by Close: the writer writes what waits and returns
	done  chan struct{} // closed when the writer returns

	// The writer's own state, touched by its goroutine only.
	w         io.WriteCloser
	fileStart time.Time // the open file's Header.Start
	written   int64     // bytes in the open file
	spare     []byte

	recorded, elided, dropped, bytes, files, writeErrs atomic.Uint64
}

// New makes a Recorder and starts its writer; it records nothing until
// Start.
func New(cfg Config) (*Recorder, error) {
	if cfg.Path == "" {
		return nil, errors.New("trace: recorder without a path")
	}
	if cfg.FileBytes <= 0 {
		cfg.FileBytes = DefaultFileBytes
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	cfg.MaxBytes = max(cfg.MaxBytes, cfg.FileBytes)
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.fs == nil {
		cfg.fs = osFS{}
	}
	if cfg.Redact != RedactOff && len(cfg.Key) == 0 {
		cfg.Key = make([]byte, 32)
		rand.Read(cfg.Key)
	}
	r := &Recorder{cfg: cfg, flags: cfg.Redact.flags(), log: cfg.Logger,
		wake: make(chan struct{}, 1), flush: make(chan chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Path is the file the recorder writes.
func (r *Recorder) Path() string { return r.cfg.Path }

// Recording reports whether calls are being recorded: one atomic load,
// for the proxy's call path.
func (r *Recorder) Recording() bool { return r.on.Load() }

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("trace: recorder closed")

// Start records calls from now on, for d (0: until Stop). A recording
// already running goes on, with the new end.
func (r *Recorder) Start(d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.until = time.Time{}
	if d > 0 {
		r.until = time.Now().Add(d)
		r.timer = time.AfterFunc(d, func() { r.Stop() })
	}
	if !r.on.Load() {
		r.log.Info("recording client calls", "path", r.cfg.Path, "redact", r.cfg.Redact.String(), "for", d)
	}
	r.on.Store(true)
	return nil
}

// Stop stops recording, and returns once what was recorded is written
// and the file closed: a complete trace that a reader can take.
func (r *Recorder) Stop() {
	r.mu.Lock()
	was := r.on.Swap(false)
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.until = time.Time{}
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return
	}
	if was {
		r.log.Info("recording stopped", "path", r.cfg.Path)
	}
	ack := make(chan struct{})
	select {
	case r.flush <- ack:
		<-ack
	case <-r.done:
	}
}

// Close stops recording and the writer. Safe to call twice.
func (r *Recorder) Close() {
	r.Stop()
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.quit)
	}
	r.mu.Unlock()
	<-r.done
}

// Stats are the recorder's counts.
func (r *Recorder) Stats() Stats {
	r.mu.Lock()
	until := r.until
	r.mu.Unlock()
	return Stats{Recorded: r.recorded.Load(), Elided: r.elided.Load(), Dropped: r.dropped.Load(),
		Bytes: r.bytes.Load(), FilesStarted: r.files.Load(), WriteErrors: r.writeErrs.Load(),
		Recording: r.on.Load(), Until: until}
}

// Record queues c for the file, redacted as configured, when recording;
// it never waits for the disk (see Config.BufferBytes).
func (r *Recorder) Record(c *Call) {
	if !r.on.Load() {
		return
	}
	cc := *c
	cc.ArgsSize = max(cc.ArgsSize, len(cc.Args))
	var sp *[]byte
	if r.cfg.Redact != RedactOff {
		sp = r.redact(&cc)
		defer r.scratch.Put(sp)
	}
	r.mu.Lock()
	if r.closed || !r.on.Load() {
		r.mu.Unlock()
		return
	}
	if r.start.IsZero() {
		r.start = time.Now() // the next file's header, written by the writer
	}
	n := len(r.buf)
	r.buf = appendCall(r.buf, &cc, r.start)
	if len(r.buf) > r.cfg.BufferBytes && !cc.ArgsDropped {
		r.buf = r.buf[:n]
		cc.ArgsDropped = true
		r.buf = appendCall(r.buf, &cc, r.start)
		r.elided.Add(1)
	}
	if len(r.buf) > r.cfg.BufferBytes {
		r.buf = r.buf[:n]
		r.dropped.Add(1)
		r.mu.Unlock()
		return
	}
	r.pending++
	full := len(r.buf) >= writeAt
	r.mu.Unlock()
	if full {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// The writer writes what waits once writeAt bytes have gathered, and at
// least every writeEvery: a system call per batch, not per call, which
// on a busy proxy costs the calls' own CPU.
const (
	writeAt    = 64 << 10
	writeEvery = 200 * time.Millisecond
)

// redact rewrites cc's args and identity as the redaction asks, in a
// buffer from the pool that the caller returns.
func (r *Recorder) redact(cc *Call) *[]byte {
	sp, _ := r.scratch.Get().(*[]byte)
	if sp == nil {
		sp = new([]byte)
	}
	b := (*sp)[:0]
	if cc.User != "" {
		b = hashName(b, r.cfg.Key, []byte(cc.User))
		cc.User = string(b) // copied: b is reused for the args below
		b = b[:0]
	}
	cc.ArgsSize = max(cc.ArgsSize, len(cc.Args))
	if r.cfg.Redact == RedactBodies || cc.ArgsDropped {
		cc.Args, cc.ArgsDropped = nil, true
	} else if red, err := redactArgs(b, r.cfg.Key, cc.Args); err != nil {
		cc.Args, cc.ArgsDropped = nil, true
	} else {
		b, cc.Args = red, red
	}
	*sp = b
	return sp
}

// run is the writer: it writes what Record queued, rotating files, until
// Close.
func (r *Recorder) run() {
	defer close(r.done)
	defer r.closeFile()
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.wake:
			r.writeQueued()
		case <-tick.C:
			r.writeQueued()
		case ack := <-r.flush:
			r.writeQueued()
			r.closeFile()
			// Stopped: the next recording's records count from a start
			// of their own, in a file of their own.
			r.mu.Lock()
			if r.pending == 0 {
				r.start = time.Time{}
			}
			r.mu.Unlock()
			close(ack)
		case <-r.quit:
			r.writeQueued()
			return
		}
	}
}

// writeQueued takes the queued records and writes them.
func (r *Recorder) writeQueued() {
	r.mu.Lock()
	if len(r.buf) == 0 {
		r.mu.Unlock()
		return
	}
	// Two buffers take turns: Record fills one while this writes the
	// other.
	buf, n, start := r.buf, r.pending, r.start
	r.buf, r.pending, r.spare = r.spare[:0], 0, nil
	r.mu.Unlock()
	if err := r.write(buf, start); err != nil {
		r.dropped.Add(uint64(n))
		if e := r.writeErrs.Add(1); e&(e-1) == 0 { // the 1st, 2nd, 4th, 8th, ... failure
			r.log.Error("recording: write failed; records dropped", "path", r.cfg.Path, "records", n, "err", err)
		}
	} else {
		r.recorded.Add(uint64(n))
		r.bytes.Add(uint64(len(buf)))
	}
	r.spare = buf
}

// write writes records whose times count from start, beginning a file
// with that start where none is open (or the open one counts from
// another), and rotating before the size bound is passed.
func (r *Recorder) write(recs []byte, start time.Time) error {
	if r.w != nil && (!start.Equal(r.fileStart) ||
		r.written+int64(len(recs)) > r.cfg.FileBytes && r.written > int64(headerSize)) {
		r.closeFile()
	}
	if r.w == nil {
		if err := r.begin(start); err != nil {
			return err
		}
	}
	n, err := r.w.Write(recs)
	r.written += int64(n)
	if err != nil {
		r.closeFile() // a part-written record: the next file starts clean
		return fmt.Errorf("trace: write %s: %w", r.cfg.Path, err)
	}
	return nil
}

// begin moves an existing file at the path to the next rotated name,
// removes the oldest beyond the bound, and opens a new file.
func (r *Recorder) begin(start time.Time) error {
	fs := r.cfg.fs
	if _, ok := fs.Size(r.cfg.Path); ok {
		seqs, err := rotated(r.cfg.Path)
		if err != nil {
			return err
		}
		next := 1
		if len(seqs) > 0 {
			next = seqs[len(seqs)-1] + 1
		}
		if err := fs.Rename(r.cfg.Path, seqName(r.cfg.Path, next)); err != nil {
			r.writeErrs.Add(1)
			return fmt.Errorf("trace: rotate %s: %w", r.cfg.Path, err)
		}
	}
	r.trim()
	w, err := fs.Create(r.cfg.Path)
	if err != nil {
		return fmt.Errorf("trace: create %s: %w", r.cfg.Path, err)
	}
	hdr := appendHeader(nil, Header{Version: Version, Flags: r.flags, Start: start})
	if _, err := w.Write(hdr); err != nil {
		w.Close()
		return fmt.Errorf("trace: write %s: %w", r.cfg.Path, err)
	}
	r.w, r.fileStart, r.written = w, start, int64(len(hdr))
	r.files.Add(1)
	return nil
}

// trim removes the oldest rotated files while they, and a new file of
// FileBytes, would be over MaxBytes.
func (r *Recorder) trim() {
	seqs, err := rotated(r.cfg.Path)
	if err != nil {
		r.writeErrs.Add(1)
		return
	}
	total := r.cfg.FileBytes
	keep := len(seqs)
	for keep > 0 {
		size, _ := r.cfg.fs.Size(seqName(r.cfg.Path, seqs[keep-1]))
		if total+size > r.cfg.MaxBytes {
			break
		}
		total += size
		keep--
	}
	for _, s := range seqs[:keep] {
		if err := r.cfg.fs.Remove(seqName(r.cfg.Path, s)); err != nil {
			r.writeErrs.Add(1)
			r.log.Warn("recording: remove an old trace file", "err", err)
		}
	}
}

// closeFile ends the open file; the next write begins a new one.
func (r *Recorder) closeFile() {
	if r.w == nil {
		return
	}
	if err := r.w.Close(); err != nil {
		r.writeErrs.Add(1)
		r.log.Warn("recording: close trace file", "path", r.cfg.Path, "err", err)
	}
	r.w = nil
}
