package trace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxRecord bounds a record a Reader takes: a request as large as
// the proxy's default largest message (100 MiB) and its fields.
const DefaultMaxRecord = 100<<20 + 64<<10

// Reader reads the records of one trace file.
type Reader struct {
	r      *bufio.Reader
	h      Header
	max    int
	buf    bytes.Buffer
	head   [recordHead]byte
	offset int64 // of the next record, for errors
}

// NewReader reads the header of a trace file from r. maxRecord bounds
// each record's payload (DefaultMaxRecord when 0 or less): a length above
// it is ErrTooLarge, and a record's bytes are taken only as they arrive,
// so a lying length costs no more memory than the file holds.
func NewReader(r io.Reader, maxRecord int) (*Reader, error) {
	if maxRecord <= 0 {
		maxRecord = DefaultMaxRecord
	}
	rd := &Reader{r: bufio.NewReaderSize(r, 64<<10), max: maxRecord, offset: int64(headerSize)}
	var hb [headerSize]byte
	if _, err := io.ReadFull(rd.r, hb[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotTrace, err)
	}
	if string(hb[:len(magic)]) != magic {
		return nil, ErrNotTrace
	}
	rest := hb[len(magic):]
	rd.h = Header{Version: binary.BigEndian.Uint16(rest), Flags: binary.BigEndian.Uint16(rest[2:]),
		Start: time.Unix(0, int64(binary.BigEndian.Uint64(rest[4:])))}
	if rd.h.Version != Version {
		return nil, fmt.Errorf("%w: %d (this reader takes %d)", ErrVersion, rd.h.Version, Version)
	}
	return rd, nil
}

// Header is the file's header.
func (r *Reader) Header() Header { return r.h }

// Next reads the next record into c, whose slices stay valid until the
// next call. It returns io.EOF at the end of the file, ErrTruncated when
// the file ends inside a record, and ErrCorrupt or ErrTooLarge for a bad
// record, after which the Reader is of no further use.
func (r *Reader) Next(c *Call) error {
	n, err := io.ReadFull(r.r, r.head[:])
	switch {
	case err == io.EOF:
		return io.EOF
	case err != nil:
		return fmt.Errorf("%w at offset %d (%d bytes of a record head)", ErrTruncated, r.offset, n)
	}
	size := int64(binary.BigEndian.Uint32(r.head[:]))
	if size > int64(r.max) {
		return fmt.Errorf("%w: %d bytes at offset %d, bound %d", ErrTooLarge, size, r.offset, r.max)
	}
	r.buf.Reset()
	got, err := r.buf.ReadFrom(io.LimitReader(r.r, size))
	if err != nil {
		return fmt.Errorf("trace: read record at offset %d: %w", r.offset, err)
	}
	if got < size {
		return fmt.Errorf("%w at offset %d (%d of %d bytes)", ErrTruncated, r.offset, got, size)
	}
	payload := r.buf.Bytes()
	if crc32.Checksum(payload, castagnoli) != binary.BigEndian.Uint32(r.head[4:]) {
		return fmt.Errorf("%w: checksum at offset %d", ErrCorrupt, r.offset)
	}
	if err := decodeCall(payload, r.h.Start, c); err != nil {
		return fmt.Errorf("%w at offset %d", err, r.offset)
	}
	r.offset += recordHead + size
	return nil
}

// Files lists the files of the recording at path in time order: its
// rotated files (path.000001, path.000002, ...) then path itself, where
// each exists.
func Files(path string) ([]string, error) {
	seqs, err := rotated(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range seqs {
		out = append(out, seqName(path, s))
	}
	if _, err := os.Stat(path); err == nil {
		out = append(out, path)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("trace: no recording at %s", path)
	}
	return out, nil
}

// rotated is the sequence numbers of path's rotated files, ascending.
func rotated(path string) ([]int, error) {
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("trace: list %s: %w", filepath.Dir(path), err)
	}
	base := filepath.Base(path) + "."
	var seqs []int
	for _, e := range ents {
		s, ok := strings.CutPrefix(e.Name(), base)
		if !ok || len(s) < 6 {
			continue
		}
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

func seqName(path string, seq int) string { return fmt.Sprintf("%s.%06d", path, seq) }

// Loaded is a recording read whole.
type Loaded struct {
	Calls []Call
	// Flags are the union of the files' header flags.
	Flags uint16
	// Files is how many files were read; Damaged lists those that ended
	// in a cut-off or corrupt record (the records before it are in Calls).
	Files   int
	Damaged []string
}

// Load reads every file of the recording at path (Files), in order. A
// file that ends in a cut-off or corrupt record contributes the records
// before it and is listed in Damaged; one that is not a trace at all, or
// of another version, is an error.
func Load(path string, maxRecord int) (*Loaded, error) {
	files, err := Files(path)
	if err != nil {
		return nil, err
	}
	out := &Loaded{}
	for _, name := range files {
		if err := out.loadFile(name, maxRecord); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l *Loaded) loadFile(name string, maxRecord int) error {
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	r, err := NewReader(f, maxRecord)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	l.Files++
	l.Flags |= r.Header().Flags
	for {
		var c Call
		err := r.Next(&c)
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, ErrTruncated) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTooLarge) {
			l.Damaged = append(l.Damaged, fmt.Sprintf("%s: %v", name, err))
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		c.Args = bytes.Clone(c.Args)
		l.Calls = append(l.Calls, c)
	}
}
