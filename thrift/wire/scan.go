package wire

import (
	"encoding/binary"
	"errors"
	"math"
)

// scanner walks Thrift bytes in buf, validating limits. When src is set,
// buf is a view of src's window starting at the message, and missing bytes
// are pulled in by src (a buffered-transport message has no length prefix,
// so its end is found by walking it).
type scanner struct {
	buf   []byte
	pos   int
	src   *Reader
	lim   Limits
	depth int
}

// readChunk bounds how much buffer is grown ahead of data that has actually
// arrived, so a peer that claims a huge length cannot make us allocate it.
const readChunk = 256 << 10

func (s *scanner) need(n int) error {
	if len(s.buf)-s.pos >= n {
		return nil
	}
	if s.src == nil {
		return ErrTruncated
	}
	if s.pos+n > s.lim.MaxMessage {
		return ErrTooLarge
	}
	b, err := s.src.fill(s.pos + n)
	s.buf = b
	return err
}

func (s *scanner) u32() (uint32, error) {
	if err := s.need(4); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint32(s.buf[s.pos:])
	s.pos += 4
	return v, nil
}

func (s *scanner) length(max int, tooBig error) (int, error) {
	v, err := s.u32()
	if err != nil {
		return 0, err
	}
	n := int32(v)
	if n < 0 {
		return 0, ErrNegativeLength
	}
	if int(n) > max {
		return 0, tooBig
	}
	return int(n), nil
}

func (s *scanner) skipN(n int) error {
	if err := s.need(n); err != nil {
		return err
	}
	s.pos += n
	return nil
}

// fixedSize is the encoded size of fixed-width types, 0 for the others.
func fixedSize(t byte) int {
	switch t {
	case TBool, TByte:
		return 1
	case TI16:
		return 2
	case TI32:
		return 4
	case TDouble, TI64:
		return 8
	case TUUID:
		return 16
	}
	return 0
}

func validType(t byte) bool {
	return fixedSize(t) > 0 || t == TString || t == TStruct || t == TMap || t == TSet || t == TList
}

func (s *scanner) skip(t byte) error {
	if n := fixedSize(t); n > 0 {
		return s.skipN(n)
	}
	switch t {
	case TString:
		n, err := s.length(s.lim.MaxString, ErrStringTooLong)
		if err != nil {
			return err
		}
		return s.skipN(n)
	case TStruct:
		if s.depth++; s.depth > s.lim.MaxDepth {
			return ErrTooDeep
		}
		for {
			if err := s.need(1); err != nil {
				return err
			}
			ft := s.buf[s.pos]
			s.pos++
			if ft == TStop {
				break
			}
			if !validType(ft) {
				return ErrBadType
			}
			if err := s.skipN(2); err != nil {
				return err
			}
			if err := s.skip(ft); err != nil {
				return err
			}
		}
		s.depth--
		return nil
	case TMap:
		if err := s.need(2); err != nil {
			return err
		}
		kt, vt := s.buf[s.pos], s.buf[s.pos+1]
		s.pos += 2
		n, err := s.length(s.lim.MaxContainer, ErrContainerLarge)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if !validType(kt) || !validType(vt) {
			return ErrBadType
		}
		return s.elements(n, kt, vt)
	case TSet, TList:
		if err := s.need(1); err != nil {
			return err
		}
		et := s.buf[s.pos]
		s.pos++
		n, err := s.length(s.lim.MaxContainer, ErrContainerLarge)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if !validType(et) {
			return ErrBadType
		}
		return s.elements(n, et, TStop)
	}
	return ErrBadType
}

// elements skips n elements (map entries when vt != TStop).
func (s *scanner) elements(n int, kt, vt byte) error {
	if s.depth++; s.depth > s.lim.MaxDepth {
		return ErrTooDeep
	}
	ks, vs := fixedSize(kt), fixedSize(vt)
	if ks > 0 && (vt == TStop || vs > 0) {
		// Fixed-width elements: one bounds check for the whole run.
		if int64(n)*int64(ks+vs) > math.MaxInt32 {
			return ErrTooLarge
		}
		if err := s.skipN(n * (ks + vs)); err != nil {
			return err
		}
		s.depth--
		return nil
	}
	for i := 0; i < n; i++ {
		if err := s.skip(kt); err != nil {
			return err
		}
		if vt != TStop {
			if err := s.skip(vt); err != nil {
				return err
			}
		}
	}
	s.depth--
	return nil
}

// message decodes the header and walks the body struct.
func (s *scanner) message() (Message, error) {
	if err := s.need(1); err != nil {
		return Message{}, err
	}
	switch b := s.buf[s.pos]; {
	case b == 0x82:
		return Message{}, &ReadError{Err: ErrCompact}
	case b&0x80 == 0:
		return Message{}, &ReadError{Err: ErrNotStrict}
	}
	word, err := s.u32()
	if err != nil {
		return Message{}, readErr(err)
	}
	if word&0xffff0000 != strictVersion {
		return Message{}, &ReadError{Err: ErrBadVersion}
	}
	typ := byte(word & 0xff)
	nameLen, err := s.length(s.lim.MaxString, ErrStringTooLong)
	if err != nil {
		return Message{}, readErr(err)
	}
	if err := s.skipN(nameLen); err != nil {
		return Message{}, readErr(err)
	}
	nameEnd := s.pos
	seq, err := s.u32()
	if err != nil {
		return Message{}, readErr(err)
	}
	m := Message{Type: typ, SeqID: int32(seq), nameEnd: nameEnd, bodyFrom: s.pos}
	if typ < Call || typ > Oneway {
		return m, &ReadError{Err: ErrMessageType, HasHeader: true, Name: string(s.buf[8:nameEnd]), SeqID: m.SeqID}
	}
	if err := s.skip(TStruct); err != nil {
		re := readErr(err)
		if re, ok := re.(*ReadError); ok {
			re.HasHeader, re.Name, re.SeqID = true, string(s.buf[8:nameEnd]), m.SeqID
		}
		return m, re
	}
	m.Buf = s.buf[:s.pos]
	return m, nil
}

// readErr wraps limit violations in a *ReadError and passes I/O errors
// (EOF, timeouts, resets) through unchanged.
func readErr(err error) error {
	switch {
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrStringTooLong), errors.Is(err, ErrContainerLarge),
		errors.Is(err, ErrNegativeLength), errors.Is(err, ErrTooDeep), errors.Is(err, ErrBadType),
		errors.Is(err, ErrTruncated):
		return &ReadError{Err: err}
	}
	return err
}
