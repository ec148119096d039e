package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hmsproxy/hmsproxy/thrift/hmsreq"
	"github.com/hmsproxy/hmsproxy/thrift/wire"
)

func sampleCall(i int) Call {
	return Call{
		Time: time.Unix(1700000000, int64(i)*1000), Took: time.Duration(i) * time.Microsecond, Conn: uint64(i % 3),
		User: "alice", UserKind: Claimed, Method: "get_table",
		Args:      hmsreq.Args(hmsreq.Str(1, "sales"), hmsreq.Str(2, fmt.Sprintf("t%d", i))),
		ReplySize: 1234, Outcome: Declared, ExField: 2, Served: "miss",
	}
}

// recordAll records calls and stops, so that the files are complete.
func recordAll(t *testing.T, cfg Config, calls []Call) *Recorder {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if err := r.Start(0); err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		r.Record(&calls[i])
	}
	r.Stop()
	return r
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.trace")
	var calls []Call
	for i := range 50 {
		calls = append(calls, sampleCall(i))
	}
	calls[7].Oneway, calls[7].Outcome, calls[7].ReplySize = true, NoReply, 0
	calls[9].UserKind, calls[9].User = Authenticated, "hive/host@REALM"
	r := recordAll(t, Config{Path: path}, calls)
	if st := r.Stats(); st.Recorded != 50 || st.Dropped != 0 || st.FilesStarted != 1 {
		t.Fatalf("stats %+v; want 50 recorded in one file", st)
	}
	l, err := Load(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Calls) != len(calls) || len(l.Damaged) != 0 {
		t.Fatalf("got %d calls, damaged %v; want %d", len(l.Calls), l.Damaged, len(calls))
	}
	for i, got := range l.Calls {
		want := calls[i]
		want.ArgsSize = len(want.Args)
		// Times are kept to the nanosecond from the file's start.
		if !got.Time.Equal(want.Time) {
			t.Fatalf("call %d time %v; want %v", i, got.Time, want.Time)
		}
		got.Time, want.Time = time.Time{}, time.Time{}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Fatalf("call %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestRotationKeepsTheBound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "calls.trace")
	cfg := Config{Path: path, FileBytes: 4 << 10, MaxBytes: 16 << 10}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Start(0)
	for i := range 2000 {
		c := sampleCall(i)
		r.Record(&c)
		if i%50 == 0 {
			r.Stop() // each stop writes and closes; the next start rotates
			r.Start(0)
		}
	}
	r.Stop()
	files, err := Files(path)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > cfg.FileBytes+1024 { // a batch may pass the bound by less than its size
			t.Errorf("%s is %d bytes; want about %d at most", f, fi.Size(), cfg.FileBytes)
		}
		total += fi.Size()
	}
	if total > cfg.MaxBytes+1024 {
		t.Errorf("files hold %d bytes; want at most about %d", total, cfg.MaxBytes)
	}
	st := r.Stats()
	if st.FilesStarted < 10 || len(files) < 3 {
		t.Fatalf("%d files begun, %d kept; want rotation", st.FilesStarted, len(files))
	}
	l, err := Load(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The newest calls survive, in order.
	last := l.Calls[len(l.Calls)-1]
	if last.Took != 1999*time.Microsecond || len(l.Damaged) != 0 {
		t.Fatalf("last call took %v, damaged %v; want the 2000th call, none", last.Took, l.Damaged)
	}
	for i := 1; i < len(l.Calls); i++ {
		if l.Calls[i].Took != l.Calls[i-1].Took+time.Microsecond {
			t.Fatalf("calls out of order at %d", i)
		}
	}
}

// slowFS is a disk whose writes wait until released.
type slowFS struct {
	osFS
	release chan struct{}
	writes  chan struct{}
}

type slowFile struct {
	io.WriteCloser
	fs *slowFS
}

func (f slowFile) Write(b []byte) (int, error) {
	f.fs.writes <- struct{}{}
	<-f.fs.release
	return f.WriteCloser.Write(b)
}

func (s *slowFS) Create(name string) (io.WriteCloser, error) {
	w, err := s.osFS.Create(name)
	return slowFile{w, s}, err
}

// A disk that does not take writes costs the caller nothing: records past
// the buffer are elided, then dropped and counted, and Record returns.
func TestSlowDiskNeverBlocks(t *testing.T) {
	fs := &slowFS{release: make(chan struct{}), writes: make(chan struct{}, 100)}
	path := filepath.Join(t.TempDir(), "calls.trace")
	r, err := New(Config{Path: path, BufferBytes: 2 << 10, fs: fs})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0)
	c := sampleCall(1)
	r.Record(&c)
	<-fs.writes // the writer is stuck in the header's write
	done := make(chan struct{})
	go func() {
		defer close(done)
		big := sampleCall(2)
		big.Args = bytes.Repeat([]byte{0}, 4<<10) // larger than the buffer: elided
		r.Record(&big)
		for i := range 500 {
			c := sampleCall(i)
			r.Record(&c)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Record blocked on a stuck disk")
	}
	st := r.Stats()
	if st.Elided == 0 || st.Dropped == 0 {
		t.Fatalf("stats %+v; want elided and dropped calls", st)
	}
	close(fs.release)
	r.Close()
	st = r.Stats()
	l, err := Load(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(l.Calls)) != st.Recorded || st.Recorded+st.Dropped != 502 {
		t.Fatalf("file holds %d calls, stats %+v; want recorded + dropped = 502", len(l.Calls), st)
	}
	if !l.Calls[1].ArgsDropped || l.Calls[1].ArgsSize != 4<<10 {
		t.Fatalf("the big call: %+v; want its args elided, their size kept", l.Calls[1])
	}
}

func TestRedaction(t *testing.T) {
	for _, tc := range []struct {
		mode Redaction
		flag uint16
	}{{RedactNames, FlagRedactNames}, {RedactBodies, FlagRedactNames | FlagNoBodies}} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "calls.trace")
			calls := []Call{sampleCall(1), sampleCall(1), sampleCall(2)}
			recordAll(t, Config{Path: path, Redact: tc.mode, Key: []byte("k")}, calls)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"sales", "alice", "t1", "t2"} {
				if bytes.Contains(raw, []byte(name)) {
					t.Errorf("the file holds %q", name)
				}
			}
			l, err := Load(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if l.Flags != tc.flag {
				t.Errorf("flags %b; want %b", l.Flags, tc.flag)
			}
			a, b, c := l.Calls[0], l.Calls[1], l.Calls[2]
			if a.User == "alice" || a.User != b.User || a.Method != "get_table" {
				t.Errorf("identity %q, %q: want one stable hash", a.User, b.User)
			}
			if tc.mode == RedactBodies {
				if !a.ArgsDropped || a.Args != nil || a.ArgsSize != len(calls[0].Args) {
					t.Fatalf("args %x dropped %v size %d; want none kept, their size", a.Args, a.ArgsDropped, a.ArgsSize)
				}
				return
			}
			// Same names, same bytes; another table, other bytes; the
			// args still walk as a struct of two strings.
			if !bytes.Equal(a.Args, b.Args) || bytes.Equal(a.Args, c.Args) {
				t.Fatalf("redacted args %x %x %x: want equal for equal names only", a.Args, b.Args, c.Args)
			}
			d := wire.NewDecoder(a.Args)
			var strs []string
			d.Fields(func(id int16, typ byte) bool {
				if typ != wire.TString {
					return false
				}
				strs = append(strs, d.String())
				return true
			})
			if d.Err() != nil || len(strs) != 2 || len(strs[0]) != 1+hashedLen || strs[0][0] != 'h' {
				t.Fatalf("redacted args decode to %q (%v)", strs, d.Err())
			}
		})
	}
}

func TestReaderRefuses(t *testing.T) {
	var good bytes.Buffer
	good.Write(appendHeader(nil, Header{Version: Version, Start: time.Unix(1, 0)}))
	c := sampleCall(3)
	good.Write(appendCall(nil, &c, time.Unix(1, 0)))
	whole := good.Bytes()
	flip := bytes.Clone(whole)
	flip[len(flip)-3] ^= 0x40
	future := bytes.Clone(whole)
	future[9] = 9
	huge := bytes.Clone(whole[:headerSize])
	huge = append(huge, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0)
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"cut", whole[:len(whole)-5], ErrTruncated},
		{"flipped", flip, ErrCorrupt},
		{"version", future, ErrVersion},
		{"not a trace", []byte("ugi=hive ip=1.2.3.4 cmd=get_table"), ErrNotTrace},
		{"huge length", huge, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewReader(bytes.NewReader(tc.b), 1<<20)
			if err == nil {
				var c Call
				err = r.Next(&c)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v; want %v", err, tc.want)
			}
		})
	}
}

// Stop and Record from many goroutines at once: every call is either in
// the files or counted as dropped (the race detector watches the rest).
func TestConcurrentRecordAndStop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "calls.trace")
	r, err := New(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0)
	var wg sync.WaitGroup
	var cycled atomic.Bool
	for g := range 4 {
		wg.Go(func() {
			// Until the cycles are over: Stop takes a file's close, and
			// calls made meanwhile are not recorded.
			for i := 0; i < 300 || !cycled.Load(); i++ {
				c := sampleCall(g*100000 + i)
				r.Record(&c)
			}
		})
	}
	wg.Go(func() {
		defer cycled.Store(true)
		for range 20 {
			r.Stop()
			r.Start(0)
		}
	})
	wg.Wait()
	r.Close()
	l, err := Load(path, 0)
	if err != nil {
		t.Fatal(err, r.Stats())
	}
	if st := r.Stats(); uint64(len(l.Calls)) != st.Recorded || len(l.Damaged) != 0 {
		t.Fatalf("files hold %d calls (damaged %v); stats %+v", len(l.Calls), l.Damaged, st)
	}
}
