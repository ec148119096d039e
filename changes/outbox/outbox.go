// Package outbox is a bounded first-in, first-out queue of records in
// files, which a change feed's producer drains while its broker is away.
//
// The outbox is a directory of segment files, named by a growing sequence
// number, and a cursor file naming the first record not yet acknowledged
// (segment and offset). Appends go to the newest segment, which rolls to
// a new one past SegmentBytes; a segment the cursor has passed is
// deleted. A record is framed as length, CRC-32C and payload; a record
// cut short by a crash is found by its frame and cut off at Open.
//
// The bound is on the bytes waiting (appended, not acknowledged): an
// append that would pass MaxBytes is refused and counted as lost, so a
// broker that stays away costs disk up to MaxBytes and no more. Writes
// are not synced: a killed process loses nothing the kernel holds, a
// crashed machine may replay acknowledged records or lose the newest
// (the feed is at least once, and its consumers drop duplicates by key).
package outbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Record is one queued message: its key, the key that picks its
// partition, and its value.
type Record struct {
	Key, PartitionKey, Value []byte
}

// Pos is a place in the outbox: a segment and a byte offset in it.
type Pos struct {
	Seg uint64
	Off int64
}

// Config configures an Outbox. Dir is required.
type Config struct {
	Dir string
	// MaxBytes bounds the bytes waiting. Default 256 MiB.
	MaxBytes int64
	// SegmentBytes is the size past which a new segment begins. Default
	// MaxBytes/16, at least 64 KiB.
	SegmentBytes int64
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
}

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("outbox: closed")

const (
	frameHeader = 8       // length, CRC-32C
	maxRecord   = 8 << 20 // a frame longer than this is damage, not a record
	cursorFile  = "cursor"
	segSuffix   = ".seg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Outbox is the queue. Its methods are safe for concurrent use.
type Outbox struct {
	cfg Config
	log *slog.Logger

	// mu guards everything below.
	mu      sync.Mutex
	segs    []uint64 // sequence numbers on disk, oldest first
	sizes   map[uint64]int64
	w       *os.File // the newest segment, open for appends
	acked   Pos      // the first record not acknowledged
	read    Pos      // the first record not yet read: at or after acked
	waiting int64    // bytes from acked to the end
	records int64    // records from acked to the end
	closed  bool

	lost     atomic.Uint64 // records refused: the outbox was full
	appended atomic.Uint64
	notify   chan struct{} // a token after each append
}

// Open opens (or creates) the outbox in cfg.Dir.
func Open(cfg Config) (*Outbox, error) {
	if cfg.Dir == "" {
		return nil, errors.New("outbox: dir is required")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 256 << 20
	}
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = max(cfg.MaxBytes/16, 64<<10)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	o := &Outbox{cfg: cfg, log: cfg.Logger, sizes: map[uint64]int64{}, notify: make(chan struct{}, 1)}
	if err := o.load(); err != nil {
		return nil, err
	}
	return o, nil
}

// load finds the segments and the cursor, checks the records after the
// cursor and cuts off a torn tail.
func (o *Outbox) load() error {
	ents, err := os.ReadDir(o.cfg.Dir)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	for _, e := range ents {
		if seq, ok := strings.CutSuffix(e.Name(), segSuffix); ok {
			if n, err := strconv.ParseUint(seq, 10, 64); err == nil {
				o.segs = append(o.segs, n)
			}
		}
	}
	slices.Sort(o.segs)
	o.acked = o.readCursor()
	if len(o.segs) == 0 || o.acked.Seg < o.segs[0] {
		o.acked = Pos{}
		if len(o.segs) > 0 {
			o.acked.Seg = o.segs[0]
		}
	}
	for _, seq := range slices.Clone(o.segs) {
		if seq < o.acked.Seg {
			o.remove(seq) // passed before a crash, not yet deleted
			continue
		}
		from := int64(0)
		if seq == o.acked.Seg {
			from = o.acked.Off
		}
		size, n, err := o.check(seq, from)
		if err != nil {
			return err
		}
		o.sizes[seq] = size
		o.waiting += size - from
		o.records += n
	}
	o.read = o.acked
	if len(o.segs) == 0 {
		return o.roll(max(o.acked.Seg, 1))
	}
	last := o.segs[len(o.segs)-1]
	f, err := os.OpenFile(o.segPath(last), os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	o.w = f
	return nil
}

// check reads segment seq from offset from, and truncates it after its
// last whole record. It returns the size and the records counted.
func (o *Outbox) check(seq uint64, from int64) (int64, int64, error) {
	f, err := os.OpenFile(o.segPath(seq), os.O_RDWR, 0o640)
	if err != nil {
		return 0, 0, fmt.Errorf("outbox: %w", err)
	}
	defer f.Close()
	r := &reader{f: f, off: from}
	var n int64
	for {
		_, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			o.log.Warn("outbox: cutting a damaged tail", "segment", seq, "offset", r.off, "err", err)
			if err := f.Truncate(r.off); err != nil {
				return 0, 0, fmt.Errorf("outbox: truncate: %w", err)
			}
			break
		}
		n++
	}
	return r.off, n, nil
}

func (o *Outbox) segPath(seq uint64) string {
	return filepath.Join(o.cfg.Dir, fmt.Sprintf("%020d%s", seq, segSuffix))
}

func (o *Outbox) readCursor() Pos {
	b, err := os.ReadFile(filepath.Join(o.cfg.Dir, cursorFile))
	if err != nil || len(b) != 16 {
		return Pos{}
	}
	return Pos{Seg: binary.BigEndian.Uint64(b), Off: int64(binary.BigEndian.Uint64(b[8:]))}
}

func (o *Outbox) writeCursor(p Pos) error {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], p.Seg)
	binary.BigEndian.PutUint64(b[8:], uint64(p.Off))
	tmp := filepath.Join(o.cfg.Dir, cursorFile+".tmp")
	if err := os.WriteFile(tmp, b[:], 0o640); err != nil {
		return fmt.Errorf("outbox: write cursor: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(o.cfg.Dir, cursorFile)); err != nil {
		return fmt.Errorf("outbox: write cursor: %w", err)
	}
	return nil
}

// roll starts segment seq for appends. Called with mu held (or at Open).
func (o *Outbox) roll(seq uint64) error {
	f, err := os.OpenFile(o.segPath(seq), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("outbox: new segment: %w", err)
	}
	if o.w != nil {
		o.w.Close()
	}
	o.w = f
	o.segs = append(o.segs, seq)
	o.sizes[seq] = 0
	if len(o.segs) == 1 {
		o.acked, o.read = Pos{Seg: seq}, Pos{Seg: seq}
	}
	return nil
}

func (o *Outbox) remove(seq uint64) {
	if err := os.Remove(o.segPath(seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		o.log.Warn("outbox: cannot delete a passed segment", "segment", seq, "err", err)
	}
	o.segs = slices.DeleteFunc(o.segs, func(s uint64) bool { return s == seq })
	delete(o.sizes, seq)
}

// Append queues records in order. It keeps as many as fit under
// MaxBytes and counts the rest as lost (a later, smaller record may still
// fit; the feed's order per table is kept only among kept records). It
// returns how many it kept.
func (o *Outbox) Append(recs ...Record) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		o.lost.Add(uint64(len(recs)))
		return 0, ErrClosed
	}
	var buf []byte
	kept := 0
	for _, r := range recs {
		frame := encode(r)
		if o.waiting+int64(len(buf)+len(frame)) > o.cfg.MaxBytes || len(frame) > maxRecord {
			o.lost.Add(1)
			continue
		}
		buf = append(buf, frame...)
		kept++
	}
	if kept == 0 {
		return 0, nil
	}
	last := o.segs[len(o.segs)-1]
	if o.sizes[last] >= o.cfg.SegmentBytes {
		if err := o.roll(last + 1); err != nil {
			o.lost.Add(uint64(kept))
			return 0, err
		}
		last++
	}
	if _, err := o.w.Write(buf); err != nil {
		// A short write leaves a torn frame; the next Open cuts it. The
		// records are lost either way.
		o.lost.Add(uint64(kept))
		return 0, fmt.Errorf("outbox: append: %w", err)
	}
	o.sizes[last] += int64(len(buf))
	o.waiting += int64(len(buf))
	o.records += int64(kept)
	o.appended.Add(uint64(kept))
	select {
	case o.notify <- struct{}{}:
	default:
	}
	return kept, nil
}

func encode(r Record) []byte {
	n := 4 + len(r.Key) + len(r.PartitionKey) + len(r.Value)
	b := make([]byte, frameHeader, frameHeader+n)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Key)))
	b = append(b, r.Key...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.PartitionKey)))
	b = append(b, r.PartitionKey...)
	b = append(b, r.Value...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-frameHeader))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[frameHeader:], castagnoli))
	return b
}

var errFrame = errors.New("outbox: damaged record")

func decode(p []byte) (Record, error) {
	var r Record
	for _, dst := range []*[]byte{&r.Key, &r.PartitionKey} {
		if len(p) < 2 {
			return r, errFrame
		}
		n := int(binary.BigEndian.Uint16(p))
		if len(p) < 2+n {
			return r, errFrame
		}
		*dst, p = p[2:2+n], p[2+n:]
	}
	r.Value = p
	return r, nil
}

// reader reads frames from one segment file.
type reader struct {
	f   *os.File
	off int64
}

// next returns the record at off and moves past it; io.EOF at the end
// (a frame cut short counts as the end only when nothing follows it:
// the caller tells the two apart with check at Open).
func (r *reader) next() (Record, error) {
	var h [frameHeader]byte
	if _, err := r.f.ReadAt(h[:], r.off); err != nil {
		if errors.Is(err, io.EOF) {
			if st, serr := r.f.Stat(); serr == nil && st.Size() > r.off {
				return Record{}, errFrame
			}
			return Record{}, io.EOF
		}
		return Record{}, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxRecord {
		return Record{}, errFrame
	}
	p := make([]byte, n)
	if _, err := r.f.ReadAt(p, r.off+frameHeader); err != nil {
		if errors.Is(err, io.EOF) {
			return Record{}, errFrame
		}
		return Record{}, err
	}
	if crc32.Checksum(p, castagnoli) != binary.BigEndian.Uint32(h[4:]) {
		return Record{}, errFrame
	}
	rec, err := decode(p)
	if err != nil {
		return Record{}, err
	}
	r.off += frameHeader + int64(n)
	return rec, nil
}

// Entry is a record read, and the position after it (for Ack).
type Entry struct {
	Record
	End Pos
}

// Read returns up to max records after the last one read, and moves the
// read position past them. What Read returned is not acknowledged: a
// producer that failed calls Rewind and reads the same records again.
// One goroutine reads.
func (o *Outbox) Read(max int) ([]Entry, error) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil, ErrClosed
	}
	at := o.read
	segs := slices.Clone(o.segs)
	sizes := make(map[uint64]int64, len(segs))
	for _, s := range segs {
		sizes[s] = o.sizes[s]
	}
	o.mu.Unlock()
	// Reading without the lock: appends only add after sizes[], and the
	// segments read are not deleted before an Ack past them, which the
	// reader makes.
	var out []Entry
	for _, seq := range segs {
		if seq < at.Seg || len(out) >= max {
			continue
		}
		if seq > at.Seg {
			at = Pos{Seg: seq}
		}
		if at.Off >= sizes[seq] {
			continue
		}
		f, err := os.Open(o.segPath(seq))
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		r := &reader{f: f, off: at.Off}
		for len(out) < max && r.off < sizes[seq] {
			rec, err := r.next()
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("outbox: read segment %d at %d: %w", seq, r.off, err)
			}
			out = append(out, Entry{Record: rec, End: Pos{Seg: seq, Off: r.off}})
		}
		at.Off = r.off
		f.Close()
	}
	o.mu.Lock()
	o.read = at
	o.mu.Unlock()
	return out, nil
}

// Rewind moves the read position back to the first record not
// acknowledged.
func (o *Outbox) Rewind() {
	o.mu.Lock()
	o.read = o.acked
	o.mu.Unlock()
}

// Ack acknowledges every record before p (an Entry.End) and deletes the
// segments passed.
func (o *Outbox) Ack(p Pos, n int) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return ErrClosed
	}
	for _, seq := range slices.Clone(o.segs) {
		switch {
		case seq < p.Seg:
			o.waiting -= o.sizes[seq] - o.offIn(seq)
			if seq != o.segs[len(o.segs)-1] {
				o.remove(seq)
			}
		case seq == p.Seg:
			o.waiting -= p.Off - o.offIn(seq)
		}
	}
	o.acked = p
	if posLess(o.read, p) {
		o.read = p
	}
	o.records -= int64(n)
	return o.writeCursor(p)
}

func posLess(a, b Pos) bool { return a.Seg < b.Seg || a.Seg == b.Seg && a.Off < b.Off }

// offIn is where the acknowledged part of segment seq ends.
func (o *Outbox) offIn(seq uint64) int64 {
	if seq == o.acked.Seg {
		return o.acked.Off
	}
	return 0
}

// Ready has a token after appends: a drainer waits on it when Read
// returned nothing.
func (o *Outbox) Ready() <-chan struct{} { return o.notify }

// Stats are the outbox's numbers.
type Stats struct {
	Waiting  int64  // records not acknowledged
	Bytes    int64  // their bytes on disk
	MaxBytes int64  // the bound
	Appended uint64 // records kept
	Lost     uint64 // records refused: full, or failed to write
}

// Stats returns the numbers.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return Stats{Waiting: o.records, Bytes: o.waiting, MaxBytes: o.cfg.MaxBytes,
		Appended: o.appended.Load(), Lost: o.lost.Load()}
}

// Close closes the files; later appends are lost and counted. Safe twice.
func (o *Outbox) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	return o.w.Close()
}
