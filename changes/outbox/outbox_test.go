package outbox

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func rec(i int) Record {
	return Record{Key: fmt.Appendf(nil, "k%d", i), PartitionKey: []byte("db.t"), Value: fmt.Appendf(nil, "value %d", i)}
}

func open(t *testing.T, dir string, max, seg int64) *Outbox {
	t.Helper()
	o, err := Open(Config{Dir: dir, MaxBytes: max, SegmentBytes: seg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// drain peeks and acknowledges batches of n until the outbox is empty,
// and returns the keys in the order read.
func drain(t *testing.T, o *Outbox, n int) []string {
	t.Helper()
	var keys []string
	for {
		recs, err := o.Read(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return keys
		}
		for _, r := range recs {
			keys = append(keys, string(r.Key))
		}
		if err := o.Ack(recs[len(recs)-1].End, len(recs)); err != nil {
			t.Fatal(err)
		}
	}
}

func segments(t *testing.T, dir string) int {
	m, err := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestOutboxOrderAcrossSegments: records come out in the order they went
// in, across segment rolls, and the segments passed are deleted.
func TestOutboxOrderAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	o := open(t, dir, 1<<20, 256)
	for i := range 100 {
		if n, err := o.Append(rec(i)); n != 1 || err != nil {
			t.Fatalf("append %d: kept %d, %v", i, n, err)
		}
	}
	if segs := segments(t, dir); segs < 5 {
		t.Fatalf("got %d segments; want several (256-byte segments)", segs)
	}
	keys := drain(t, o, 7)
	if len(keys) != 100 {
		t.Fatalf("got %d records; want 100", len(keys))
	}
	for i, k := range keys {
		if k != fmt.Sprintf("k%d", i) {
			t.Fatalf("record %d is %s", i, k)
		}
	}
	if segs := segments(t, dir); segs != 1 {
		t.Fatalf("got %d segments after draining; want 1 (the one appended to)", segs)
	}
	if st := o.Stats(); st.Waiting != 0 || st.Bytes != 0 {
		t.Fatalf("got %+v after draining; want nothing waiting", st)
	}
}

// TestOutboxReopenKeepsUnacknowledged: a restart resumes after the last
// acknowledgement, not before it and not at the end.
func TestOutboxReopenKeepsUnacknowledged(t *testing.T) {
	dir := t.TempDir()
	o := open(t, dir, 1<<20, 200)
	for i := range 30 {
		o.Append(rec(i))
	}
	recs, _ := o.Read(12)
	if err := o.Ack(recs[len(recs)-1].End, len(recs)); err != nil {
		t.Fatal(err)
	}
	o.Read(5) // read but not acknowledged: must come again
	o.Close()
	o2 := open(t, dir, 1<<20, 200)
	if st := o2.Stats(); st.Waiting != 18 {
		t.Fatalf("reopened with %d waiting; want 18", st.Waiting)
	}
	o2.Append(rec(30))
	keys := drain(t, o2, 100)
	if len(keys) != 19 || keys[0] != "k12" || keys[18] != "k30" {
		t.Fatalf("got %v; want k12..k30", keys)
	}
}

// TestOutboxBoundCountsLoss: past MaxBytes, appends are refused and
// counted; acknowledging frees room again.
func TestOutboxBoundCountsLoss(t *testing.T) {
	o := open(t, t.TempDir(), 1000, 300)
	frame := int64(len(encode(rec(100)))) // 100..999: frames of one size
	fit := int(1000 / frame)
	kept, _ := o.Append(func() []Record {
		var rs []Record
		for i := range fit + 5 {
			rs = append(rs, rec(100+i))
		}
		return rs
	}()...)
	if kept != fit {
		t.Fatalf("kept %d; want %d (1000 bytes of %d-byte frames)", kept, fit, frame)
	}
	if st := o.Stats(); st.Lost != 5 || st.Bytes > 1000 {
		t.Fatalf("got %+v; want 5 lost and at most 1000 bytes", st)
	}
	recs, _ := o.Read(3)
	o.Ack(recs[2].End, 3)
	if n, _ := o.Append(rec(900), rec(901), rec(902)); n != 3 {
		t.Fatalf("after acknowledging 3, kept %d of 3", n)
	}
}

// TestOutboxCutsTornTail: a record cut short by a crash (and bytes of
// junk) is dropped at Open; the whole records before it stay.
func TestOutboxCutsTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail []byte
	}{
		{"half a header", []byte{0, 0}},
		{"half a record", encode(rec(9))[:12]},
		{"bad checksum", func() []byte { b := encode(rec(9)); b[len(b)-1] ^= 1; return b }()},
		{"absurd length", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := open(t, dir, 1<<20, 1<<20)
			o.Append(rec(0), rec(1))
			o.Close()
			m, _ := filepath.Glob(filepath.Join(dir, "*"+segSuffix))
			f, err := os.OpenFile(m[0], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(tc.tail)
			f.Close()
			o2 := open(t, dir, 1<<20, 1<<20)
			o2.Append(rec(2))
			if keys := drain(t, o2, 10); len(keys) != 3 || keys[2] != "k2" {
				t.Fatalf("got %v; want k0 k1 k2", keys)
			}
		})
	}
}

func TestOutboxClosed(t *testing.T) {
	o := open(t, t.TempDir(), 1<<20, 0)
	o.Close()
	o.Close()
	if _, err := o.Append(rec(0)); err != ErrClosed {
		t.Fatalf("append after close: %v; want ErrClosed", err)
	}
	if st := o.Stats(); st.Lost != 1 {
		t.Fatalf("lost %d; want 1", st.Lost)
	}
}

// TestOutboxRewind: a rewind reads again from the first record not
// acknowledged; an acknowledgement of part of what was read keeps the
// rest for the next read.
func TestOutboxRewind(t *testing.T) {
	o := open(t, t.TempDir(), 1<<20, 128)
	for i := range 10 {
		o.Append(rec(i))
	}
	first, _ := o.Read(6)
	o.Ack(first[1].End, 2)
	if next, _ := o.Read(2); string(next[0].Key) != "k6" {
		t.Fatalf("after reading 6, read %s; want k6", next[0].Key)
	}
	o.Rewind()
	if keys := drain(t, o, 3); len(keys) != 8 || keys[0] != "k2" {
		t.Fatalf("after a rewind got %v; want k2..k9", keys)
	}
}
